"""icd/timeline.py Templates: a work's phase and encoded args made once. A work placed again (a reused recording's)
is kept by identity; a work whose sizes were read at completion (an indirect dispatch: a new Work each frame) by
what it is, so equal frames make its template once; a measured one never."""
from __future__ import annotations

from tessera.icd.recording import Work
from tessera.icd.timeline import Templates


def _indirect(groups: list[int], invocations: int) -> Work:
    work = Work("dispatch", "compute", "vkCmdDispatchIndirect", {"group_size": [64, 1, 1]},
                at_completion=lambda: None)
    work.info["groups"] = groups   # what its completion read
    work.invocations = invocations
    return work


def test_a_completed_work_is_kept_by_what_it_is_and_a_measured_one_never():
    templates, made = Templates(), []

    def make(work: Work):
        made.append(work)
        return ("template", len(made))

    first = templates.of_work(_indirect([2, 1, 1], 128), make)
    assert templates.of_work(_indirect([2, 1, 1], 128), make) is first and len(made) == 1   # another frame's, equal
    assert templates.of_work(_indirect([3, 1, 1], 192), make) != first and len(made) == 2   # other sizes
    assert templates.of_work(_indirect([2, 1, 1], 64), make) != first and len(made) == 3    # one field differs
    measured = _indirect([2, 1, 1], 128)
    measured.measured = object()   # the backend's statistics of this execution
    templates.of_work(measured, make)
    templates.of_work(measured, make)
    assert len(made) == 5
    unhashable = _indirect([2, 1, 1], 128)
    unhashable.info["regions"] = [{"size": 4}]   # a value no key can hold: made each time
    templates.of_work(unhashable, make)
    templates.of_work(unhashable, make)
    assert len(made) == 7
    kept = Work("dispatch", "compute", "vkCmdDispatch", {"group_size": [64, 1, 1]}, invocations=64)
    assert templates.of_work(kept, make) is templates.of_work(kept, make) and len(made) == 8   # by identity
