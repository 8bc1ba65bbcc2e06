"""The loop stays readable: agent/loop.py holds the order of a turn and what each way of ending it
means; its parts (intake, turn, guard, final turn, checkpoint, capacity waits) and a whole run
(run.py) live in modules of their own. A change that grows it past the mark moves a part out."""
from __future__ import annotations

from tests.paths import ROOT

LOOP_LINES_AT_MOST = 399


def test_the_loop_module_stays_under_four_hundred_lines() -> None:
    lines = len((ROOT / "agent" / "loop.py").read_text(encoding="utf-8").splitlines())
    assert lines <= LOOP_LINES_AT_MOST, (
        f"agent/loop.py is {lines} lines: move a part into a module of its own (see its docstring)")
