"""What a run inherits from the runs before it in the same Slack thread, within a fixed budget.

A thread lives for days: a question, follow-ups, corrections. The opening of run N carries
the original question and constraints verbatim (in `<task>`), every follow-up and note
verbatim (they are short), the report's outline as markers (`open_section` opens a
section's full text), the last answer, and ONE rolling thread summary that each run
rewrites at its end, so run N knows what runs 1…N-1 established without the opening
growing with N. Content stays behind markers; only the summary is prose, and it is capped.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from .figures import sentences
from .markers import MARKER_RE

# The opening of any run in a thread stays within this many characters (~4 chars a token:
# ≈ 6k tokens), however long the thread grows; tests print and check it.
OPENING_BUDGET_CHARS = 24_000
FIRST_SENTENCE_CHARS = 160
LAST_ANSWER_CHARS = 1_500
MAX_FACTS = 40
MAX_DEAD_ENDS = 12
MAX_OPEN_QUESTIONS = 12
ITEM_CHARS = 300
# Follow-ups are kept verbatim up to this size each; a longer one is shortened in the opening
# (its full text stays in the thread, where the requester wrote it).
FOLLOW_UP_CHARS = 1_200


class ThreadFact(BaseModel):
    claim: str = Field(max_length=ITEM_CHARS * 2)
    markers: list[str] = Field(default_factory=list)  # "s4": the passages that support it


class DeadEnd(BaseModel):
    approach: str
    why_failed: str


class ThreadSummary(BaseModel):
    """The thread's rolling memory: rewritten (not appended to) at the end of every run."""

    facts: list[ThreadFact] = Field(default_factory=list)
    dead_ends: list[DeadEnd] = Field(default_factory=list)
    open_questions: list[str] = Field(default_factory=list)

    def capped(self) -> ThreadSummary:
        """Newest items win: a later run's facts replace what they supersede."""
        return ThreadSummary(
            facts=[ThreadFact(claim=_cut(f.claim, ITEM_CHARS), markers=f.markers) for f in self.facts[-MAX_FACTS:]],
            dead_ends=[
                DeadEnd(approach=_cut(d.approach, ITEM_CHARS), why_failed=_cut(d.why_failed, ITEM_CHARS))
                for d in self.dead_ends[-MAX_DEAD_ENDS:]
            ],
            open_questions=[_cut(q, ITEM_CHARS) for q in self.open_questions[-MAX_OPEN_QUESTIONS:]],
        )


class OutlineEntry(BaseModel):
    section_id: str
    title: str
    first_sentence: str
    revisions: int = 0


# The opening's index of the thread's sources: at most this many, most-cited first (the rest are
# counted, and every marker stays citable and opens with open_source); what each supports, cut.
MAX_SOURCES_LISTED = 30
SUPPORTS_CHARS = 90
SOURCE_TITLE_CHARS = 70


class SourceEntry(BaseModel):
    """One line of the opening's source index: a marker says what it points at."""

    marker: str
    title: str
    domain: str
    date: str  # when it was read, YYYY-MM-DD
    supports: str  # a few words of what it supports: the sentence citing it, or the passage's start
    cited: int = 0  # how often the report, the answer and the thread's memory cite it


class ThreadMemory(BaseModel):
    """Everything a continuation's opening says about the thread's earlier runs."""

    run_id: str  # the run just before this one
    runs_before: int = 1
    follow_ups: list[str] = Field(default_factory=list)  # earlier follow-ups, oldest first, verbatim
    last_answer: str = ""
    outline: list[OutlineEntry] = Field(default_factory=list)
    summary: ThreadSummary = Field(default_factory=ThreadSummary)
    sources: int = 0  # how many passages are registered: all stay citable by marker
    source_index: list[SourceEntry] = Field(default_factory=list)  # most-cited first, bounded


def first_sentence(body: str) -> str:
    text = " ".join(body.split())
    for end in (". ", "! ", "? "):
        at = text.find(end)
        if 0 < at < FIRST_SENTENCE_CHARS:
            return text[: at + 1]
    return _cut(text, FIRST_SENTENCE_CHARS)


def render(memory: ThreadMemory) -> str:
    """The `<thread>` part of a continuation's opening (the task and constraints come before it),
    within OPENING_BUDGET_CHARS: over it, the oldest and least useful parts are shortened first."""
    text = _render(memory)
    if len(text) <= OPENING_BUDGET_CHARS:
        return text
    trimmed = memory.model_copy(deep=True)
    while len(text) > OPENING_BUDGET_CHARS and _trim_once(trimmed):
        text = _render(trimmed)
    return text


def _trim_once(memory: ThreadMemory) -> bool:
    """Shorten one thing, oldest and least useful first; False when nothing is left to shorten."""
    if len(memory.summary.facts) > MAX_FACTS // 4:
        memory.summary.facts = memory.summary.facts[1:]
    elif len(memory.follow_ups) > 3:
        dropped = memory.follow_ups.pop(0)
        memory.follow_ups[0] = f"(an earlier follow-up, shortened) {_cut(dropped, 200)}"
    elif len(memory.source_index) > MAX_SOURCES_LISTED // 3:
        memory.source_index = memory.source_index[:-1]  # the least-cited first
    elif any(len(e.first_sentence) > 60 for e in memory.outline):
        for entry in memory.outline:
            entry.first_sentence = _cut(entry.first_sentence, 60)
    elif len(memory.outline) > 1:
        memory.outline = memory.outline[:-1]
    else:
        return False
    return True


def _render(memory: ThreadMemory) -> str:
    lines = [
        f'<thread runs_before="{memory.runs_before}" last_run="{memory.run_id}">',
        "This continues research already done in this thread. Build on it: do not redo finished work or reopen "
        "settled questions; revise sections with revise_section (same ids) where the new request changes them, "
        "or add new ones.",
    ]
    if memory.follow_ups:
        lines.append("Earlier follow-ups in the thread, oldest first (each was answered by a run):")
        lines += [f"- {_cut(f, FOLLOW_UP_CHARS)}" for f in memory.follow_ups]
    lines.append("The report's outline (open a section's full text with open_section):")
    lines += [
        f'- {e.section_id} "{e.title}"'
        + (f" (revised ×{e.revisions})" if e.revisions else "")
        + f": {e.first_sentence}"
        for e in memory.outline
    ] or ["- no sections yet"]
    summary = memory.summary
    lines.append("What the thread has established (cite these markers; they stay valid):")
    lines += [f"- {_with_markers(f)}" for f in summary.facts] or ["- nothing yet"]
    if summary.dead_ends:
        lines.append("Dead ends (do not retry without a new angle):")
        lines += [f"- {d.approach}: {d.why_failed}" for d in summary.dead_ends]
    if summary.open_questions:
        lines.append("Open questions:")
        lines += [f"- {q}" for q in summary.open_questions]
    if memory.last_answer.strip():
        lines += ["The last run's answer:", _cut(memory.last_answer.strip(), LAST_ANSWER_CHARS)]
    if memory.source_index:
        lines.append(
            "The thread's sources, most-cited first (marker · title · site · read on · what it supports); "
            "open_source opens one's passage and the evidence around it:"
        )
        lines += [
            f"- [{e.marker}] {_cut(e.title, SOURCE_TITLE_CHARS)} · {e.domain} · {e.date} · “{_cut(e.supports, SUPPORTS_CHARS)}”"
            + (f" (cited ×{e.cited})" if e.cited > 1 else "")
            for e in memory.source_index
        ]
    if memory.sources:
        more = memory.sources - len(memory.source_index)
        lines.append(
            (f"… and {more} more " if memory.source_index and more > 0 else f"{memory.sources} ")
            + f"passages are registered, [s1]–[s{memory.sources}]: cite any by marker; open_source opens any, "
            "open_section shows which passages a section cites."
        )
    lines.append("</thread>")
    return "\n".join(lines)


def roll(previous: ThreadSummary | None, answer: str, context_summaries: list[str]) -> ThreadSummary:
    """The thread summary after one more run: what it knew, plus this run's cited answer
    sentences and its compaction handoffs (facts with handles, dead ends, open questions).
    Deterministic (no model call): the same run always leaves the same memory, and a newer
    statement of a claim replaces an older one; the caps keep the newest."""
    summary = (previous or ThreadSummary()).model_copy(deep=True)
    facts: dict[str, ThreadFact] = {_claim_key(f.claim): f for f in summary.facts}
    dead_ends = {d.approach: d for d in summary.dead_ends}
    questions = list(summary.open_questions)
    for handoff in context_summaries:
        parsed = _handoff(handoff)
        for fact in parsed.get("established_facts", []):
            claim, handle = str(fact.get("claim", "")), str(fact.get("handle", ""))
            markers = [f"s{m}" for m in MARKER_RE.findall(handle)]
            if claim and markers:
                facts.pop(_claim_key(claim), None)
                facts[_claim_key(claim)] = ThreadFact(claim=_cut(claim, ITEM_CHARS), markers=markers)
        for dead in parsed.get("dead_ends", []):
            approach = str(dead.get("approach", ""))
            if approach:
                dead_ends[approach] = DeadEnd(approach=approach, why_failed=str(dead.get("why_failed", "")))
        questions += [str(q) for q in parsed.get("open_questions", []) if str(q) not in questions]
    for sentence in _cited_sentences(answer):  # kept as written, markers in place
        facts.pop(_claim_key(sentence), None)
        facts[_claim_key(sentence)] = ThreadFact(claim=sentence, markers=[f"s{m}" for m in MARKER_RE.findall(sentence)])
    return ThreadSummary(
        facts=list(facts.values()), dead_ends=list(dead_ends.values()), open_questions=questions
    ).capped()


def _handoff(text: str) -> dict[str, Any]:
    """A compaction handoff as re-injected: its JSON body (see context/compaction.py)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return {}
    try:
        parsed = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _claim_key(claim: str) -> str:
    return " ".join(MARKER_RE.sub(" ", claim).lower().replace(" .", ".").split()).rstrip(".")


def _cited_sentences(text: str) -> list[str]:
    return [s for s in sentences(text) if MARKER_RE.search(s)]


def _with_markers(fact: ThreadFact) -> str:
    """A claim as written keeps its markers in place; a handoff's claim gets its handle appended."""
    if MARKER_RE.search(fact.claim):
        return fact.claim
    return f"{fact.claim} {''.join(f'[{m}]' for m in fact.markers)}".rstrip()


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def source_index(sources: list[Any], texts: list[str], *, limit: int = MAX_SOURCES_LISTED) -> list[SourceEntry]:
    """The thread's sources for the opening, most-cited first (ties: first registered first), each
    with the first sentence of `texts` (report, answer, memory) that cites it as what it supports."""
    from .display import domain_of

    counts: dict[str, int] = {}
    supports: dict[str, str] = {}
    for text in texts:
        for sentence in sentences(text):
            for number in MARKER_RE.findall(sentence):
                marker = f"s{number}"
                counts[marker] = counts.get(marker, 0) + 1
                supports.setdefault(marker, " ".join(MARKER_RE.sub("", sentence).split()))
    order = {source.marker: n for n, source in enumerate(sources)}
    ranked = sorted(sources, key=lambda s: (-counts.get(s.marker, 0), order[s.marker]))
    return [
        SourceEntry(
            marker=s.marker,
            title=s.title or domain_of(s.url),
            domain=domain_of(s.url),
            date=f"{s.retrieved_at:%Y-%m-%d}",
            supports=supports.get(s.marker) or " ".join(s.passage.split()),
            cited=counts.get(s.marker, 0),
        )
        for s in ranked[:limit]
    ]
