"""Summary args of per-region counters on the merged trace's GPU slices (tessera run --regions).

Role: for a render pass instance's GPU slices (binning and main), the merge (merge.py `_event`)
adds one extra_data per captured counter, `Regions <counter name>`, whose value is compact JSON:
`{"max": M, "mean": X, "hottest": [column, row], "subpass": S, "layer": L}` over every array
(subpass x layer or view) of the instance's REGIONS message, the hottest region being the first
(in array, then row, then column order) holding the maximum; mean = total / regions (partial
regions at the render area's right and bottom edges count as whole regions). Plus
`Regions heatmaps`: where `tessera regions` / the merge put the instance's pictures
(`regions/t<tag>-s<submit>-*.png`, relative to the session folder).

Pure functions of one process's metadata (metadata.ProcessMeta.regions); no state.
"""
from __future__ import annotations

import json
from typing import Any

from tessera.schemas import slice_args as table

from .naming import arg_value

# arg names: schemas/slice_args.py
COUNTER_ARG = table.REGION_COUNTER.label        # a template: {counter}
HEATMAPS_ARG = table.REGION_HEATMAPS.label


def summarize(payload: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(counter name, {max, mean, hottest, subpass, layer}) per counter of one REGIONS payload."""
    out = []
    for k, counter in enumerate(payload.get("counters", [])):
        best, where, total, cells = -1, None, 0, 0
        for array in payload.get("arrays", []):
            for row_index, row in enumerate(array["values"][k]):
                for col, v in enumerate(row):
                    total += v
                    cells += 1
                    if v > best:
                        best, where = v, (col, row_index, array["subpass"], array["layer"])
        if where is None:
            continue
        col, row, subpass, layer = where
        out.append((counter["name"], {"max": best, "mean": round(total / cells, 2), "hottest": [col, row],
                                      "subpass": subpass, "layer": layer}))
    return out


def slice_args(regions: dict[tuple[int, int], bytes], tag: int, submit: int | None) -> list[tuple[str, str]]:
    """The args of workload `tag` in `submit` (ProcessMeta.regions: (submitID, tagID) -> REGIONS JSON);
    with no submit known, the workload's only REGIONS message, if it has exactly one."""
    body = regions.get((submit, tag)) if submit is not None else None
    if body is None and submit is None:
        bodies = [(s, b) for (s, t), b in regions.items() if t == tag]
        if len(bodies) == 1:
            submit, body = bodies[0]
    if body is None:
        return []
    try:
        payload = json.loads(body)
        args = [(COUNTER_ARG.format(counter=name), arg_value(stats)) for name, stats in summarize(payload)]
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):   # a hostile payload: no args
        return []
    return args + [(HEATMAPS_ARG, f"regions/t{tag}-s{submit}-*.png")] if args else []
