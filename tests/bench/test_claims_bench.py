"""bench.claims' verdicts on the shipped cases, without a model: the deterministic layer's goals hold
(off-topic, wrong-figure and wrong-name-or-date claims caught ≥ 90%, supported ones flagged ≤ 5%), so a
change to the anchor or the rules that loses them fails here (the bench prints the cases)."""
from __future__ import annotations

import asyncio

from bench import claims


def test_the_shipped_cases_meet_the_deterministic_goals() -> None:
    cases = claims.read_cases(claims.CASES)
    assert len(cases) >= 60 and len({c.language for c in cases}) >= 5, "at least 60 cases in several languages"
    assert {"different topic", "wrong figure", "wrong name or date", "supported"} <= {c.kind for c in cases}
    outcomes = asyncio.run(claims.run_cases(cases, judge=None))
    lines, met = claims.summary(outcomes, "none")
    assert met, "\n".join(lines)
    assert lines[-1].startswith("claims: unsupported caught ") and lines[-1].endswith(f"{len(cases)} cases (judge: none)")


def test_the_bench_says_when_the_saved_pages_are_absent(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(claims, "PAGES", tmp_path / "absent")
    [line] = claims.verify_sources(claims.read_cases(claims.CASES))
    assert "are absent" in line and "not checked against their pages" in line
