"""Elision: old, large results become stubs. Cheap, loses nothing (fetch_result restores them).

Rules (DESIGN.md): older than ELIDE_AFTER_STEPS steps AND larger than ELIDE_MIN_TOKENS;
never a result whose markers or id the agent used in its latest turns; never the most
recent result of each tool. Elisions are batched so each batch frees enough to pay for the
prompt-cache rewrite it causes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import defaults
from ..citations import MARKER_RE
from .history import RESULT_ID_RE, History, ResultRecord
from .stubs import stub_for
from .tokens import CHARS_PER_TOKEN


@dataclass
class ElisionPlan:
    stubs: dict[ResultRecord, str]
    freed_tokens: int
    rewritten_tokens: int  # tokens whose cache the batch rewrites: the unsettled steps after the anchor


def eligible(history: History) -> list[ResultRecord]:
    current = history.next_step
    latest = set(history.latest_by_tool().values())
    mentions = history.recent_mentions(defaults.CITED_RECENTLY_TURNS)
    cited = {f"s{m}" for m in MARKER_RE.findall(mentions)} | {m for m in RESULT_ID_RE.findall(mentions)}
    found = []
    for step in history.unsettled_steps():
        if step.recent(current):
            break  # steps are in order: the rest are younger
        for record in step.results:
            if (
                record.worth_eliding
                and record not in latest
                and record.result_id not in cited
                and not cited.intersection(record.markers)
            ):
                found.append(record)
    return found


def plan(history: History, budget_tokens: int, context_tokens: int) -> ElisionPlan | None:
    """The batch to apply now, or None when it would not pay for itself yet."""
    candidates = eligible(history)
    if not candidates:
        return None
    stubs = {record: record.proposed_stub(stub_for) for record in candidates}
    freed = sum(record.tokens - len(stub) // CHARS_PER_TOKEN for record, stub in stubs.items())
    # The prefix up to the settled-steps anchor is read from cache; everything after it is
    # written again, so that is what a batch must pay for.
    rewritten = sum(step.chars() for step in history.unsettled_steps()) // CHARS_PER_TOKEN
    pressure = context_tokens >= defaults.ELISION_PRESSURE_SHARE * budget_tokens
    share = defaults.ELISION_PRESSURE_MIN_SHARE if pressure else defaults.ELISION_BATCH_MIN_SHARE
    if freed < defaults.ELISION_BATCH_MIN_TOKENS or (rewritten and freed / rewritten < share):
        return None
    return ElisionPlan(stubs=stubs, freed_tokens=freed, rewritten_tokens=rewritten)
