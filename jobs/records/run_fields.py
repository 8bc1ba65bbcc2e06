"""Run state as its Redis fields: what one RunEvent changes (`write_for`, only those items, so a
write's cost does not grow with the run), and the RunState assembled back from the five keys."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from agent import (
    Finished,
    Progress,
    RunEvent,
    Section,
    SectionRevised,
    SectionWritten,
    Source,
    SourceAdded,
)
from agent.charts import Chart
from agent.events import (
    ChartDrawn,
    ConstraintsFound,
    EarlierFound,
    EarlierRef,
    FileUnreadable,
    Notice,
    SearchDegraded,
    utcnow,
)
from agent.planning import Plan
from agent.thread_memory import ThreadSummary

from ..keyspace.connection import text
from .models import BudgetLeft, Run, RunState, RunStatus, Step, Usage

__all__ = ["MESSAGE_FIELDS", "Write", "write_for"]


# Fields of the Run record that change after creation; kept apart so attaching them never
# rewrites the record.
MESSAGE_FIELDS = ("progress_message", "report_message")


@dataclass
class Write:
    """One change to a run: hot fields, sections (moved to the end or revised in place), sources."""

    fields: dict[str, str] = field(default_factory=dict)
    status: RunStatus | None = None
    sections: list[tuple[Section, bool]] = field(default_factory=list)  # (section, moved to the end)
    sources: list[Source] = field(default_factory=list)
    # The progress step this change added (True) or updated (False); older steps are not resent.
    step: tuple[Step, bool] | None = None


def _time(value: datetime | None) -> str:
    return value.isoformat() if value else ""


def write_for(state: RunState, event: RunEvent, before_steps: int | None = None) -> Write:
    """What `event` changes, read off the state after it was applied: only those items.
    `before_steps` is the number of the last step before the event (None: there was none), so a
    Progress that added no step (the same activity again) sends none."""
    change = Write(fields={"updated_at": _time(state.updated_at)})
    if state.report_updated_at is not None and isinstance(
        event, (SectionWritten, SectionRevised, Finished, ChartDrawn)
    ):
        change.fields["report_updated_at"] = _time(state.report_updated_at)
    if isinstance(event, SourceAdded):
        change.sources.append(state.sources[event.source.marker])
        if state.steps:
            change.step = (state.steps[-1], False)  # the step that found it lists it
    elif isinstance(event, (SectionWritten, SectionRevised)):
        section = state.section(event.section_id)
        if section is not None:
            change.sections.append((section, isinstance(event, SectionWritten)))
    elif isinstance(event, Finished):
        change.status = state.status
        change.fields.update(
            summary=state.summary,
            reason=state.reason,
            phase=state.phase,
            activity=state.activity,
            context_summaries=json.dumps(state.context_summaries),
            finished_at=_time(state.finished_at),
            checking=state.checking,
            thread_summary=_thread_summary(state),
        )
    elif isinstance(event, ConstraintsFound):
        change.fields["run"] = state.run.model_dump_json(exclude=set(MESSAGE_FIELDS))
        change.fields["constraints_changed"] = "1" if state.constraints_changed else ""
    elif isinstance(event, FileUnreadable):
        change.fields["file_notices"] = _file_notices(state)
    elif isinstance(event, (SearchDegraded, Notice)):
        change.fields["notices"] = json.dumps(state.notices)
    elif isinstance(event, ChartDrawn):
        change.fields["charts"] = _charts(state)
    elif isinstance(event, EarlierFound):
        change.fields["earlier"] = json.dumps([r.model_dump(mode="json") for r in state.earlier])
    else:
        change.status = state.status
        change.fields.update(
            phase=state.phase,
            activity=state.activity,
            checking=state.checking,
            usage=state.usage.model_dump_json(),
            budget_left=state.budget_left.model_dump_json() if state.budget_left else "",
        )
        if isinstance(event, Progress) and state.steps and (before_steps is None or state.steps[-1].n != before_steps):
            change.step = (state.steps[-1], True)
    return change


def _assemble(
    run_id: str,
    hot: Mapping[bytes, bytes],
    sections: Mapping[bytes, bytes],
    order: list[bytes],
    sources: Mapping[bytes, bytes],
    source_order: list[bytes],
    steps: list[bytes] | None = None,
) -> RunState:
    h = {text(k): text(v) for k, v in hot.items()}
    run = Run.model_validate_json(h["run"]).model_copy(update={name: h.get(name) or None for name in MESSAGE_FIELDS})
    return RunState.model_validate(
        {
            "run": run,
            "status": h["status"],
            "version": int(h.get("version", 0)),
            "phase": h.get("phase", ""),
            "activity": h.get("activity", ""),
            "checking": h.get("checking", ""),
            "sections": [Section.model_validate_json(sections[sid]) for sid in order if sid in sections],
            "sources": {text(m): Source.model_validate_json(sources[m]) for m in source_order if m in sources},
            "summary": h.get("summary", ""),
            "reason": h.get("reason", ""),
            "context_summaries": json.loads(h.get("context_summaries") or "[]"),
            "usage": Usage.model_validate_json(h["usage"]) if h.get("usage") else Usage(),
            "budget_left": BudgetLeft.model_validate_json(h["budget_left"]) if h.get("budget_left") else None,
            # Timestamps are stored as ISO text; pydantic parses them back.
            "started_at": h.get("started_at") or None,
            "updated_at": h.get("updated_at") or utcnow(),
            "report_updated_at": h.get("report_updated_at") or None,
            "finished_at": h.get("finished_at") or None,
            "notices": json.loads(h.get("notices") or "[]"),
            "file_notices": json.loads(h.get("file_notices") or "[]"),
            "constraints_changed": bool(h.get("constraints_changed")),
            "charts": [Chart.model_validate(c) for c in json.loads(h.get("charts") or "[]")],
            "earlier": [EarlierRef.model_validate(r) for r in json.loads(h.get("earlier") or "[]")],
            # Runs written before steps had a list of their own kept them in the hash.
            "steps": [json.loads(step) for step in steps] if steps else json.loads(h.get("steps") or "[]"),
            "next_check": h.get("next_check") or None,
            "plan": Plan.model_validate_json(h["plan"]) if h.get("plan") else None,
            "plan_expires_at": h.get("plan_expires_at") or None,
            "approved_by": h.get("approved_by") or None,
            "thread_summary": ThreadSummary.model_validate_json(h["thread_summary"])
            if h.get("thread_summary")
            else None,
        }
    )


def _file_notices(state: RunState) -> str:
    return json.dumps([notice.model_dump() for notice in state.file_notices])


def _charts(state: RunState) -> str:
    return json.dumps([c.model_dump(mode="json") for c in state.charts])


def _thread_summary(state: RunState) -> str:
    return state.thread_summary.model_dump_json() if state.thread_summary is not None else ""
