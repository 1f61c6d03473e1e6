"""CPU references of the control flow of the example shaders, per SPIR-V basic block.

Written from the GLSL sources, independent of the SPIR-V toolkit and the driver; each list
index is a block in tessera.spirv's global numbering (docs/spirv.md), which the comments map
to source. Used by the block-counter tests (tests/spirv) and the shader instrumentation tests
(tests/integration)."""
from __future__ import annotations


def collatz_blocks(values: list[int], count: int, invocations: int) -> list[int]:
    """Block executions of examples/shaders/collatz.comp over `invocations` threads."""
    c = [0] * 14
    for i in range(invocations):
        c[0] += 1                        # main entry: i = gid.x; if (i >= count)
        if i >= count:
            c[1] += 1                    # return
            continue
        c[2] += 1                        # s = collatz_steps(values[i]); if (s > 20)
        v, steps = values[i], 0
        c[5] += 1                        # collatz_steps entry
        while True:
            c[6] += 1                    # loop header
            c[7] += 1                    # condition v > 1 && steps < 1000
            if not (v > 1 and steps < 1000):
                break
            c[8] += 1                    # body: if ((v & 1) == 0)
            if v & 1 == 0:
                c[9] += 1                # v >>= 1
                v >>= 1
            else:
                c[10] += 1               # v = 3v + 1
                v = (3 * v + 1) & 0xFFFFFFFF
            c[11] += 1                   # selection merge: steps++
            steps += 1
            c[12] += 1                   # continue target
        c[13] += 1                       # loop merge: return steps
        if steps > 20:
            c[3] += 1                    # s += 1000
        c[4] += 1                        # store, return
    return c


def branchy_blocks(width: int, height: int) -> list[int]:
    """Block executions of examples/shaders/branchy.frag over a width x height covering draw
    (one fragment per pixel, no multisampling; helper invocations do not count)."""
    c = [0] * 11
    for y in range(height):
        for x in range(width):
            c[0] += 1                    # entry: p = ivec2(gl_FragCoord.xy); if ((p.x + p.y) % 3 == 0)
            if (x + y) % 3 == 0:
                c[1] += 1                # discard
                continue
            c[2] += 1                    # c = color; if (p.x < 8)
            if x < 8:
                c[3] += 1                # c.r = 1.0
            else:
                c[4] += 1                # loop set-up: i = 0
                trips = y % 4
                c[5] += trips + 1        # loop header
                c[6] += trips + 1        # condition i < p.y % 4
                c[7] += trips            # body: c.g = c.g * 0.5 + 0.25
                c[8] += trips            # continue: i++
                c[9] += 1                # loop merge
            c[10] += 1                   # out_color = c
    return c
