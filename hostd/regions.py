"""`tessera regions SESSION`: per-region counters (REGIONS messages) as heatmaps and JSON.

Role: reads every REGIONS frame of a session's logs (tessera run --regions), and for each render
pass instance (tag, submit) and counter writes a heatmap PNG into SESSION/regions/ with Pillow:
the region grid scaled over the render area, a colour bar with the counter's unit, the pass's tag,
labels, subpass/layer and counter in the title. `--json` prints, per instance and counter, the grid
row by row instead. `write_heatmaps` is also what the merge calls when a session holds REGIONS
(merge.py), so `tessera run --regions` leaves the pictures next to the merged trace. Reads session
logs and spool files; writes only SESSION/regions/ (0700 when it creates it; each PNG 0600, renamed
into place from an exclusive temporary: schemas/files.py); no state beyond one invocation.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import click

from tessera.schemas.files import OutputError, private_folder, write_atomic

REGIONS_TYPE = 0x84        # schemas.frames.MessageType.REGIONS
SCALE = 4                  # pixels of the picture per framebuffer pixel at most (small render areas)
MAX_SIDE = 768             # the picture's longer side (render area scaled to it)
BAR = 48


@dataclass
class Instance:
    submit: int | None
    tag: int
    payload: dict


def instances(session: Path) -> list[Instance]:
    from tessera.schemas.frames import iter_file
    from tessera.schemas.logfile import read_frames

    from .merge import find_inputs   # regular files only; what processes that ended left staged joins them first

    inputs = find_inputs(session)
    out = []
    sources = [(log, read_frames) for log in inputs.logs] + [(spool, iter_file) for spool in inputs.spools]
    for path, reader in sources:
        for frame in reader(path):
            if frame.type == REGIONS_TYPE:
                try:
                    out.append(Instance(frame.sequence, frame.tag, json.loads(frame.body)))
                except ValueError:
                    continue
    return out


def heatmap_path(folder: Path, inst: Instance, array: dict, counter: dict) -> Path:
    return folder / f"t{inst.tag}-s{inst.submit}-sp{array['subpass']}-l{array['layer']}-{slug(counter['name'])}.png"


def write_heatmaps(session: Path, found: list[Instance] | None = None, counter: str | None = None) -> list[Path]:
    """One PNG per instance, array and counter (or only `counter`, by name) in SESSION/regions/."""
    found = instances(session) if found is None else found
    folder, written = session / "regions", []
    for inst in found:
        for array in inst.payload["arrays"]:
            for k, c in enumerate(inst.payload["counters"]):
                if counter is None or c["name"].lower() == counter.lower():
                    private_folder(folder)
                    path = heatmap_path(folder, inst, array, c)
                    heatmap(inst, array, k, path)
                    written.append(path)
    return written


def unit(name: str) -> str:
    if name.endswith("bytes"):
        return "bytes"
    if "thread-operations" in name:
        return "thread-operations"
    return name.split()[-1].lower()


def _colour(t: float) -> tuple[int, int, int]:
    """A dark-blue -> red -> yellow ramp (perceptually ordered, readable at a glance)."""
    stops = [(0.0, (20, 24, 60)), (0.35, (120, 30, 120)), (0.7, (230, 80, 40)), (1.0, (255, 240, 120))]
    for (a, ca), (b, cb) in zip(stops, stops[1:]):
        if t <= b:
            f = (t - a) / (b - a) if b > a else 0.0
            return tuple(int(ca[i] + (cb[i] - ca[i]) * f) for i in range(3))
    return stops[-1][1]


def heatmap(inst: Instance, array: dict, k: int, path: Path) -> None:
    from PIL import Image, ImageDraw, ImageFont

    p = inst.payload
    x, y, w, h = p["render_area"]
    rw, rh = p["region_size"]
    grid = array["values"][k]
    counter = p["counters"][k]
    scale = min(SCALE, MAX_SIDE / max(w, h))
    pw, ph = max(1, int(w * scale)), max(1, int(h * scale))
    top, pad = 44, 8
    image = Image.new("RGB", (pw + BAR + 3 * pad + 70, ph + top + pad), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    peak = max((v for row in grid for v in row), default=0)
    for ry, row in enumerate(grid):
        for rx, v in enumerate(row):
            x0, y0 = pad + int(rx * rw * scale), top + int(ry * rh * scale)
            x1, y1 = pad + int(min(w, (rx + 1) * rw) * scale), top + int(min(h, (ry + 1) * rh) * scale)
            draw.rectangle([x0, y0, x1 - 1, y1 - 1], fill=_colour(v / peak if peak else 0.0), outline=(90, 90, 90))
    labels = " / ".join(p.get("labels", []))
    draw.text((pad, 4), f"t{inst.tag} submit {inst.submit}  {counter['name']} (id {counter['id']:#x})", fill=(0, 0, 0),
              font=font)
    draw.text((pad, 18), f"subpass {array['subpass']} layer {array['layer']}  area {w}x{h}+{x}+{y}  "
              f"regions {rw}x{rh}  {labels}"[:160], fill=(60, 60, 60), font=font)
    bx = pw + 2 * pad
    for i in range(ph):
        draw.line([(bx, top + i), (bx + BAR // 2, top + i)], fill=_colour(1 - i / max(1, ph - 1)))
    draw.text((bx + BAR // 2 + 4, top), f"{peak}", fill=(0, 0, 0), font=font)
    draw.text((bx + BAR // 2 + 4, top + ph - 12), "0", fill=(0, 0, 0), font=font)
    draw.text((bx, top + ph // 2), unit(counter["name"]), fill=(0, 0, 0), font=font)
    data = io.BytesIO()
    image.save(data, format="PNG")
    write_atomic(path, data.getvalue())     # an exclusive 0600 temporary, renamed (schemas/files.py)


def slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


@click.command("regions")
@click.argument("session", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--pass", "tag", type=int, default=None, help="Only the render pass instance with this tag (t<N>).")
@click.option("--counter", default=None, help="Only this counter (name, case-insensitive).")
@click.option("--json", "as_json", is_flag=True, help="Print the grids row by row instead of writing pictures.")
def regions(session: Path, tag: int | None, counter: str | None, as_json: bool) -> None:
    """Heatmaps (PNG, in SESSION/regions/) or grids of the per-region counters of SESSION (tessera run --regions)."""
    found = [i for i in instances(session) if tag is None or i.tag == tag]
    if not found:
        raise click.ClickException(f"no per-region counters in {session} (run with tessera run --regions)")
    if not as_json:
        try:
            written = write_heatmaps(session, found, counter)
        except OSError as e:        # schemas.files.OutputError (a full disk) or the folder
            raise click.ClickException(str(e) if isinstance(e, OutputError) else f"{session}/regions: {e}") from None
        for path in written:
            click.echo(str(path))
        return
    out_json = []
    for inst in found:
        p = inst.payload
        chosen = [k for k, c in enumerate(p["counters"]) if counter is None or c["name"].lower() == counter.lower()]
        entry = {"tag": inst.tag, "submit": inst.submit, "labels": p.get("labels", []), "render_area": p["render_area"],
                 "region_size": p["region_size"], "arrays": []}
        for array in p["arrays"]:
            counters = [{**p["counters"][k], "grid": array["values"][k]} for k in chosen]
            entry["arrays"].append({"subpass": array["subpass"], "layer": array["layer"], "counters": counters})
        out_json.append(entry)
    click.echo(json.dumps(out_json, indent=1))
