"""Which args a joined GPU slice shows: each fact once, raw handles last.

Role: the merge (merge.py `_event`) puts the driver's own extra_data and the layer's
workload metadata on one render-stage event. Both describe the same workload, often the
same facts in their own words (the driver's `Command`, `Groups`, `Items`; the layer's
`command`, `groups`, `items`), and sometimes the driver's is only a placeholder the layer
has since resolved (an indirect dispatch: the driver writes `Groups: [-1, -1, -1]`,
`Items: -1`, `Estimated: indirect sizes`; the layer's ANNEX gives the sizes read at
submit). The layer's fields are the merged trace's stable args (docs/hostd.md "Merge
rules" 4: the same names whatever the driver or the source, Arm's layer included), so
`reconcile()` decides, per workload, what of the driver's view to keep next to them:

  - the same value on both sides: shown once, as the layer's field; the driver's
    entry is dropped;
  - the driver's value unknown (-1, or a -1 in a list) and the layer's known: the
    driver's placeholder is dropped (superseded);
  - the layer's value unknown and the driver's known (a driver that reads indirect
    sizes itself): the layer's field is left out, the driver's entry stays;
  - `Estimated` (the driver's note that some of its values are guesses) is dropped
    when every value it names (ESTIMATES) that the event carries was superseded by a
    known layer value; it stays when they were only equal (the layer's are the same
    guesses, e.g. an indirect build's maximum primitive counts) or when it is about
    values the layer does not give (a render pass's vertices);
  - two different known values: both kept, the driver's renamed `<Name> (driver)`, so
    the disagreement is marked with its source rather than shown as two unlabelled answers;
  - the driver's `Workload` is dropped when the layer's `kind` says the same or more
    (`transfer` vs `buffer_transfer`);
  - raw handles the layer sends (HANDLE_FIELDS: device, command buffer) go after every
    meaningful arg, grouped under `handles.` (the Perfetto UI folds a dotted key into a
    group), off the first screen.

Pure functions over plain values, no state; the merge calls `reconcile` once per distinct
workload (its result is part of the join it reuses), never per event.
"""
from __future__ import annotations

from typing import Any

from tessera.schemas import slice_args as table

# Every name below is the table's (schemas/slice_args.py): the driver writes its args by it.
# Driver extra_data name -> the metadata field stating the same fact (schemas/json/workload.schema.json).
# Compared as the driver writes them: str() of the value.
SAME_FACT: dict[str, str] = table.SAME_FACT
WORKLOAD_KEY = table.WORKLOAD.label     # the driver's workload class; the layer's `kind` supersedes it
KIND_FIELD = table.KIND_FIELD
# The driver's Workload values that a more precise layer kind refines.
REFINED_BY_KIND = {table.WORKLOAD_CLASSES["transfer"]: frozenset({"buffer_transfer", "image_transfer", "tensor_copy"})}
ESTIMATED_KEY = table.ESTIMATED.label
# The driver's `Estimated` values -> the entries whose values they call guesses.
ESTIMATES: dict[str, tuple[str, ...]] = {note: tuple(table.DRIVER_LABELS[k] for k in keys)
                                         for note, keys in table.ESTIMATES.items()}
HANDLE_FIELDS = table.HANDLE_FIELDS     # raw Vulkan handles of the layer's WORKLOAD
DRIVER_TWIN = table.DRIVER_TWIN.label   # a driver entry the layer's known value disagrees with


def _unknown_text(text: str) -> bool:
    if text == "-1":
        return True
    return text[:1] == "[" and "-1" in text.strip("[]").split(", ")


def _unknown_value(value: Any) -> bool:
    if value is None or (value.__class__ is int and value == -1):
        return True
    return value.__class__ is list and -1 in value


def kinds_agree(workload: str, kind: Any) -> bool:
    """Whether the driver's `Workload` and the layer's `kind` name the same class of work."""
    if not isinstance(kind, str):
        return False
    return workload == kind.replace("_", " ") or kind in REFINED_BY_KIND.get(workload, ())


_MISSING = object()
_HANDLE_ARGS = tuple((field, table.HANDLES.label.format(field=field)) for field in HANDLE_FIELDS)
HANDLE_ARGS = frozenset(arg for _, arg in _HANDLE_ARGS)       # the arg names written last
# (Workload, kind) pairs that agree (kinds_agree), for one set look-up per workload.
_KINDS = ("render_pass", "dispatch", "trace_rays", "buffer_transfer", "image_transfer", "tensor_copy",
          "acceleration_structure_build", "acceleration_structure_copy", "data_graph")
_AGREE = frozenset((w, k) for k in _KINDS for w in {k.replace("_", " "), *REFINED_BY_KIND} if kinds_agree(w, k))


def reconcile(driver: dict[str, str], meta: dict[str, Any]) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """({driver entry name: new name, or None to drop it}, {metadata field: arg name, or None to
    leave it out}) for a GPU slice with the driver's entries `driver` (name -> value) joined to
    `meta`. Names in neither map stay as they are; HANDLE_FIELDS map to `handles.<field>` (the
    merge writes those last). The first map's keys are in `driver`'s order. Called once per
    joined workload: kept to plain dict and set look-ups."""
    entries: dict[str, str | None] = {}
    fields: dict[str, str | None] = {}
    superseded = None
    same = SAME_FACT.get
    get = meta.get
    for name, text in driver.items():
        field = same(name)
        if field is None:
            if name == WORKLOAD_KEY:
                kind = get(KIND_FIELD)
                if kind.__class__ is str and ((text, kind) in _AGREE or kinds_agree(text, kind)):
                    entries[name] = None
            continue
        value = get(field, _MISSING)
        if value is _MISSING:
            continue
        if (value if value.__class__ is str else str(value)) == text:
            entries[name] = None
        elif _unknown_text(text):
            entries[name] = None
            if not _unknown_value(value):
                if superseded is None:
                    superseded = set()
                superseded.add(name)
        elif _unknown_value(value):
            fields[field] = None
        else:
            entries[name] = DRIVER_TWIN.format(label=name)
    if superseded:
        estimated = driver.get(ESTIMATED_KEY)
        if estimated is not None:
            named = [n for n in ESTIMATES.get(estimated, ()) if n in driver]
            if named and all(n in superseded for n in named):
                entries[ESTIMATED_KEY] = None
                entries = {k: entries[k] for k in driver if k in entries}     # in the driver's order
    for field, arg in _HANDLE_ARGS:
        if field in meta:
            fields[field] = arg
    return entries, fields
