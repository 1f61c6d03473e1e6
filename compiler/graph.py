"""Control-flow facts of the inlined shader: order, back edges, loop depth.

Role: reverse post-order (definition order for the allocators), the back
edges found by depth-first search (every loop of structured SPIR-V closes
with one), the natural-loop nesting depth of each block (spill weights and
typical-path frequencies), and the blocks reachable from entry. Pure
functions of a `Shader`; results are plain lists.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Shader


@dataclass
class Flow:
    rpo: list[int]                      # reachable blocks, reverse post-order
    back_edges: list[tuple[int, int]]   # (source, loop header)
    depth: list[int]                    # loop nesting depth per block
    loops: int                          # number of loop headers


def flow(shader: Shader) -> Flow:
    blocks = shader.blocks
    n = len(blocks)
    state = [0] * n                     # 0 new, 1 on stack, 2 done
    post: list[int] = []
    back: list[tuple[int, int]] = []
    if n:
        state[0] = 1
        stack = [(0, iter(blocks[0].succs))]
        while stack:
            b, it = stack[-1]
            for s in it:
                if state[s] == 0:
                    state[s] = 1
                    stack.append((s, iter(blocks[s].succs)))
                    break
                if state[s] == 1:
                    back.append((b, s))
            else:
                state[b] = 2
                post.append(b)
                stack.pop()
    rpo = post[::-1]
    depth = [0] * n
    headers: set[int] = set()
    loops: dict[int, set[int]] = {}
    for src, head in back:
        body = loops.setdefault(head, {head})
        work = [src]
        while work:
            x = work.pop()
            if x in body:
                continue
            body.add(x)
            work.extend(p for p in blocks[x].preds if state[p] == 2)
        headers.add(head)
    for body in loops.values():
        for x in body:
            depth[x] += 1
    for b in blocks:
        b.depth = depth[b.index]
    return Flow(rpo, back, depth, len(headers))
