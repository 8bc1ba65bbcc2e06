"""No reader meets a citation marker: every surface that shows the run's text (the report, its
canvas, `history`, a re-check's digest, the progress message and the progress stream) shows the
report's footnote numbers instead, and the same [n] for the same source everywhere (generated over
reports whose revisions, reasons, activity and checking lines cite sources the report cites now, no
longer cites, may not show, or never registered)."""
from __future__ import annotations

import re
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from agent import Finished, Progress, SectionRevised, SectionWritten, Source, SourceAdded
from agent.events import Disagreement
from bot.desk.recheck_digest import digest
from bot.publishing.canvas_render import render_canvas
from bot.publishing.progress_render import render_progress
from bot.publishing.reader_text import footnote_numbers
from bot.publishing.report_render import render_report
from bot.publishing.stream_render import render_view
from bot.surface.steering import section_history
from jobs import Run, RunState
from jobs.records.state import apply_event
from jobs.upkeep.recheck import RecheckRun

RAW_MARKER = re.compile(r"\[s\d+\]")
FETCHED = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)
SOURCES = 6  # s1…s6; s5 is private (a DM's message), s99 was never registered


def _source(n: int) -> Source:
    return Source(marker=f"s{n}", url=f"https://site{n}.example.org/page", title=f"Page {n}",
                  passage=f"Fund {n} charges 0.0{n}% a year.", retrieved_at=FETCHED, private=n == 5)


def _apply(state: RunState, *events: object) -> RunState:
    for event in events:
        state = apply_event(state, event)  # type: ignore[arg-type]
    return state


cites = st.lists(st.sampled_from([*range(1, SOURCES + 1), 99]), min_size=1, max_size=4)


def _text(words: str, numbers: list[int]) -> str:
    return f"{words} " + " ".join(f"0.0{n % 9}% [s{n}]." for n in numbers)


@st.composite
def runs(draw: st.DrawFn) -> tuple[RunState, RunState]:
    """(the report before a re-check, after it): sections written, then revised with reasons."""
    state = RunState(run=Run(channel="C0TEST", thread_ts="1700000000.000001", requester="U0ANA",
                             question="Compare the fees", team="T0TEST"))
    state = _apply(state, *(SourceAdded(source=_source(n)) for n in range(1, SOURCES + 1)))
    count = draw(st.integers(1, 3))
    for i in range(1, count + 1):
        state = _apply(state, SectionWritten(section_id=f"sec{i}", title=f"Fees {i}", body=_text("Fee", draw(cites))))
    before = state
    for i in range(1, count + 1):
        for _ in range(draw(st.integers(0, 2))):
            state = _apply(state, SectionRevised(section_id=f"sec{i}", body=_text("New fee", draw(cites)),
                                                 reason=_text("A newer fact sheet", draw(cites))))
    state = _apply(state, Progress(phase="researching", activity=_text("Revising sec1:", draw(cites))),
                   Disagreement(text=_text("Sources differ", draw(cites))))
    return before, state


def _surfaces(before: RunState, state: RunState) -> dict[str, str]:
    """Every text a reader is shown about this run, by where it is shown."""
    ended = _apply(state, Finished(status="completed", summary=_text("All cheap", [1, 2]), reason=""))
    recheck = RecheckRun(run_id="r2", parent_run_id="r1", channel="C0TEST", thread_ts="1700000000.000001",
                         since=FETCHED)
    return {
        "progress": render_progress(state).text,
        "stream": repr(render_view(state)),
        "report": repr(render_report(ended).blocks),
        "canvas": render_canvas(ended).markdown(),
        "history": section_history(ended, None),
        "digest": digest(recheck, before, ended, None),
    }


@settings(max_examples=60, deadline=None)
@given(runs())
def test_no_surface_shows_a_citation_marker(run: tuple[RunState, RunState]) -> None:
    before, state = run
    for where, shown in _surfaces(before, state).items():
        assert not RAW_MARKER.search(shown), f"{where} shows a marker: {RAW_MARKER.findall(shown)}"
        assert "site5.example.org" not in shown, f"{where} shows a private source outside the requester's DM"


@settings(max_examples=60, deadline=None)
@given(runs())
def test_history_numbers_a_source_as_the_report_does(run: tuple[RunState, RunState]) -> None:
    _, state = run
    numbers = footnote_numbers(state)
    for section in state.sections:
        for revision in section.revisions:
            for n in {int(m) for m in re.findall(r"\[s(\d+)\]", revision.body)}:
                if f"s{n}" in numbers:
                    assert f"[{numbers[f's{n}']}]" in section_history(state, section.section_id)
