"""`deepthread eval --from-feedback`: the questions whose reports were rated 👎, as a question set.

Each line keeps the team's reasons and notes and the rated report's cited sources, so the next
eval re-researches exactly what people found wrong. Only a question asked in a public channel
leaves its conversation: a run rated in a private channel or a DM (or anywhere Slack did not
vouch for as public when the verdict was given) is never written (docs/security.md, usage rule).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from redis import Redis

from agent import PROFILES, assemble
from jobs import RunStore
from jobs.budgets.spend import is_direct
from jobs.exceptions import RunNotFound
from jobs.records.feedback import REASONS, FeedbackStore

from .questions import EvalQuestion

__all__ = ["feedback_questions", "write_questions"]

KIND = "rated down"


def feedback_questions(redis: Redis, since: datetime | None = None) -> Iterator[EvalQuestion]:
    """The rated-down public questions, oldest verdict first within each run; `since`: only 👎
    given at or after it."""
    store, runs = FeedbackStore(redis), RunStore(redis)
    found: list[tuple[datetime, EvalQuestion]] = []
    for run_id in sorted(set(store.rated_runs())):
        verdicts = store.verdicts(run_id)
        down = sorted(
            (v for v in verdicts if v.verdict == "unhelpful" and (since is None or v.at >= since)), key=lambda v: v.at
        )
        if not down or any(v.where != "public" for v in verdicts):
            continue
        try:
            state = runs.get(run_id)
        except RunNotFound:  # the run is gone (retention): its verdicts go with it
            continue
        if not state.run.channel or is_direct(state.run.channel):
            continue
        report = assemble(state.summary, state.sections, state.sources, private_allowed=False)
        notes = [
            ": ".join(p for p in (REASONS.get(v.reason or "", ""), v.note) if p) or "rated down, no note" for v in down
        ]
        question = EvalQuestion(
            id=f"feedback-{run_id}",
            question=state.run.question,
            profile=state.run.profile if state.run.profile in PROFILES else "standard",
            kind=KIND,
            notes=notes,
            sources=list(dict.fromkeys(n.source.url for n in report.footnotes)),
        )
        found.append((down[0].at, question))
    for _, question in sorted(found, key=lambda pair: pair[0]):
        yield question


def write_questions(path: Path, questions: list[EvalQuestion]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for q in questions:
            out.write(
                json.dumps(
                    q.model_dump(exclude_defaults=True) | {"id": q.id, "question": q.question}, ensure_ascii=False
                )
                + "\n"
            )
