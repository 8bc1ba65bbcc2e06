"""What one task agent hands back, how it is kept across a crash, and how the lead reads it.

All of a spawn_tasks call's reports come back as ONE tool result, a section per task, so the
lead's context holds the findings and never a task agent's own history.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from .. import defaults
from ..citations import MARKER_RE, SourceRegistry
from ..context.history import History
from ..display import domain_of, shorten
from ..results import Locator, StoredResult

Status = Literal["completed", "incomplete", "failed"]
# A report is stored under this kind in the result store (not fetchable by the model: no r_ id).
STORED_KIND = "task_agent"
# Characters of a passage quoted when a failed task agent hands back what it met.
LEAD_PASSAGE_CHARS = 220


class TaskReport(BaseModel):
    number: int
    objective: str
    status: Status
    findings: str  # the task agent's answer, or what it met before it failed
    reason: str = ""  # why it did not complete normally
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    active_seconds: float = 0.0
    # The run's result-id counter when it finished: a resumed run issues ids above it, so the
    # ids this report may mention keep pointing at its own results.
    result_ids_issued: int = 0

    def section(self) -> str:
        requests = f"{self.requests} request" + ("" if self.requests == 1 else "s")
        head = f"## Task {self.number} — {shorten(self.objective, 120)} · {self.status} ({requests})"
        if self.reason:
            head += f"\nNote: {self.reason}."
        return f"{head}\n{self.findings.strip()}"


def record_id(call_id: str, index: int) -> str:
    """Deterministic: the same spawn_tasks call, answered again after a resume, finds its finished tasks."""
    return f"task_{call_id}_{index}"


def to_stored(report: TaskReport, call_id: str, index: int) -> StoredResult:
    text = report.findings
    return StoredResult(
        id=record_id(call_id, index),
        kind=STORED_KIND,
        text=text,
        arguments=report.model_dump(mode="json", exclude={"findings"}),
        locator=Locator(
            what=f"task agent {report.number}: {shorten(report.objective, 80)}", end=len(text), total=len(text)
        ),
    )


def from_stored(stored: StoredResult) -> TaskReport:
    return TaskReport.model_validate({**stored.arguments, "findings": stored.text})


def met_passages(history: History, registry: SourceRegistry) -> str:
    """For a task agent that failed before writing: the passages its results carried, as leads."""
    seen: list[str] = []
    texts = [*history.summaries, *(r.text for step in history.steps for r in step.results)]
    for text in texts:
        for number in MARKER_RE.findall(text):
            if f"s{number}" not in seen:
                seen.append(f"s{number}")
    sources = [s for s in (registry.get(m) for m in seen) if s is not None]
    # Page excerpts are evidence; snippets only leads: excerpts first.
    sources.sort(key=lambda s: s.kind != "excerpt")
    if not sources:
        return "It found nothing before it stopped."
    lines = ["It wrote no findings. Passages its searches and reads returned (unchecked by it; read before relying):"]
    for source in sources[: defaults.TASK_FAILED_LEADS]:
        lines.append(
            f"- [{source.marker}] {shorten(source.title, 60)} ({domain_of(source.url)}, {source.kind}): "
            f'"{shorten(source.passage, LEAD_PASSAGE_CHARS)}"'
        )
    if len(sources) > defaults.TASK_FAILED_LEADS:
        lines.append(f"- … and {len(sources) - defaults.TASK_FAILED_LEADS} more passages.")
    return "\n".join(lines)


def render(reports: list[TaskReport], reused: int = 0) -> str:
    """The one tool result of a spawn_tasks call."""
    counts = {status: sum(1 for r in reports if r.status == status) for status in ("completed", "incomplete", "failed")}
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    # The task list comes first: an elided result's stub quotes the opening as what it covers.
    tasks = "; ".join(f"{r.number}. {shorten(r.objective, defaults.TASK_LABEL_CHARS)}" for r in reports)
    head = (
        f"{len(reports)} task agent(s) reported ({summary}): {tasks}.\nCite their [sN] markers as they are; "
        "check conflicting or surprising figures yourself before relying on them."
    )
    if reused:
        head += f" {reused} of them had finished before the run was resumed and were not run again."
    return "\n\n".join([head, *(r.section() for r in reports)])
