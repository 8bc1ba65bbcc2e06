"""Applying RunEvents to run state: the one place state changes shape.

`apply_event` is pure (callers keep the old state); `apply_in_place` changes the writer's own
copy, so adding the 2,000th source costs what adding the first did (no copy of the registry).
"""

from __future__ import annotations

from agent import (
    Finished,
    Progress,
    RunEvent,
    Section,
    SectionRevised,
    SectionWritten,
    SourceAdded,
    UsageRecorded,
)
from agent.events import (
    ChartDrawn,
    ConflictSettled,
    ConstraintsFound,
    Disagreement,
    EarlierFound,
    FileUnreadable,
    Notice,
    SearchDegraded,
    utcnow,
)
from agent.report import Revision

from .models import EARLIER_KEPT, SOURCES_PER_STEP, STEPS_KEPT, BudgetLeft, FileNotice, RunState, RunStatus, Step, Usage

__all__ = ["apply_event", "apply_in_place"]


def apply_event(state: RunState, event: RunEvent) -> RunState:
    """Return the state after `event`; unknown section ids are ignored, never fatal."""
    state = state.model_copy(
        update={"sources": dict(state.sources), "sections": list(state.sections), "steps": list(state.steps)}
    )
    return apply_in_place(state, event)


def apply_in_place(state: RunState, event: RunEvent) -> RunState:
    """Change `state` itself by `event` and return it (the sections list and sources dict too)."""
    if isinstance(event, Progress):
        state.phase, state.activity = event.phase, event.activity
        _add_step(state, event)
        if state.status in (RunStatus.queued, RunStatus.planned):  # an approved plan's research has begun
            state.status = RunStatus.running
    elif isinstance(event, Disagreement):
        state.checking = event.text
    elif isinstance(event, ConflictSettled):
        state.checking = ""  # settled: the resolution is in the report, not on the progress line
    elif isinstance(event, (SearchDegraded, Notice)):
        if event.text not in state.notices:
            state.notices = [*state.notices, event.text]
    elif isinstance(event, ConstraintsFound):
        state.run = state.run.model_copy(update={"constraints": event.constraints})
        state.constraints_changed = True
    elif isinstance(event, FileUnreadable):
        if all(n.file_id != event.file_id for n in state.file_notices):
            state.file_notices = [*state.file_notices, FileNotice(file_id=event.file_id, text=event.notice)]
    elif isinstance(event, SourceAdded):
        state.sources[event.source.marker] = event.source
        if state.steps and len(state.steps[-1].sources) < SOURCES_PER_STEP:
            last = state.steps[-1]  # replaced, not changed: an older copy of the state keeps its own
            state.steps[-1] = last.model_copy(update={"sources": [*last.sources, event.source.marker]})
    elif isinstance(event, SectionWritten):
        state.sections[:] = [s for s in state.sections if s.section_id != event.section_id] + [
            Section(
                section_id=event.section_id,
                title=event.title,
                body=event.body,
                figures_checked=event.figures_checked,
                flags=event.flags,
                claims=event.claims,
            )
        ]
    elif isinstance(event, SectionRevised):
        for n, s in enumerate(state.sections):
            if s.section_id == event.section_id:
                state.sections[n] = s.model_copy(
                    update={
                        "body": event.body,
                        "figures_checked": event.figures_checked,
                        "flags": event.flags,
                        "claims": event.claims,
                        "revisions": [*s.revisions, Revision(body=s.body, reason=event.reason)],
                    }
                )
    elif isinstance(event, UsageRecorded):
        state.usage = Usage(**event.model_dump(include=set(Usage.model_fields)))
        if event.profile is not None and event.requests_left is not None and event.minutes_left is not None:
            state.budget_left = BudgetLeft(
                profile=event.profile, requests_left=event.requests_left, minutes_left=event.minutes_left
            )
    elif isinstance(event, ChartDrawn):  # a redraw replaces its chart's previous version, in place
        at = next((n for n, c in enumerate(state.charts) if c.chart_id == event.chart.chart_id and not c.run_id), None)
        charts = list(state.charts)  # replaced, not changed: an older copy of the state keeps its own
        if at is None:
            charts.append(event.chart)
        else:
            charts[at] = event.chart
        state.charts = charts
    elif isinstance(event, EarlierFound):  # in the order shown, each report once
        known = {(r.permalink, r.title) for r in state.earlier}
        new = [r for r in event.reports if (r.permalink, r.title) not in known]
        state.earlier = [*state.earlier, *new][:EARLIER_KEPT]
    elif isinstance(event, Finished):
        state.status = RunStatus(event.status)
        state.summary = event.summary
        state.reason = event.reason
        state.context_summaries = event.context_summaries
        state.thread_summary = event.thread_summary
        state.checking = ""
        state.phase = event.status
        state.activity = ""
        state.finished_at = utcnow()
    state.version += 1
    state.updated_at = utcnow()
    if isinstance(event, (SectionWritten, SectionRevised, Finished, ChartDrawn)):
        state.report_updated_at = state.updated_at
    return state


def _add_step(state: RunState, event: Progress) -> None:
    """A new activity is a new step; the same words again (a repeated line) are not."""
    if not event.activity or (state.steps and state.steps[-1].activity == event.activity):
        return
    n = state.steps[-1].n + 1 if state.steps else 1
    state.steps.append(Step(n=n, phase=event.phase, activity=event.activity))
    del state.steps[:-STEPS_KEPT]
