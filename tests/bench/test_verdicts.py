"""The benches' verdicts that do not depend on timing, at a quick size, so a change that breaks
one fails CI (timing ratios stay in `python -m bench.…`, printed, never asserted here)."""
from __future__ import annotations

from pathlib import Path

from bench import ack, state


def test_run_state_bytes_per_event_do_not_grow_with_the_run() -> None:
    # 300 sources: past the 60 progress steps a run keeps, where rewriting them all made the
    # bytes per event grow (1.38x on main at 2,000 sources).
    ours, _ = state.measure_both(300, 100, baseline=False)
    assert state.byte_failures(ours) == [], (ours.start.bytes_per_event, ours.end.bytes_per_event)
    assert ours.end.bytes_per_event < 1_500, "an event late in a run writes about what one early in it does"


def test_every_mention_is_acked_and_becomes_exactly_one_run_and_retries_start_nothing(tmp_path: Path) -> None:
    assert ack.run(20, 20, tmp_path, timing=False) == []
