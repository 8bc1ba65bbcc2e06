"""The claim check write_section and revise_section run before a body is saved, after the figure check.

Every cited sentence is anchored in the sources it cites and judged (agent/claims). A claim the
sources do not (fully) support is refused with what its anchor says instead and what to do, as a
failed figure check is. Sending the same claim with the same markers again is taken as the model's
considered choice: the section is saved and the claim marked for the reader, never silently trusted.

A sentence already judged in this run, or in a section this thread already has, keeps its verdict
(a revision re-judges only the sentences it changes). The judge is a small-model call charged to the
run like a page read; it runs only while the budget has room for it (the finalization reserve
included, never past a limit), within CLAIM_JUDGE_SECONDS, and what it cannot judge is "unchecked".
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from ..claims.check import ToCheck, check
from ..claims.judge import AROUND_CHARS, CLAIM_CHARS, JUDGE_BATCH, JUDGE_MAX_TOKENS
from ..claims.models import ClaimCheck
from ..claims.text import claim_spans, plain_claim
from ..display import shorten
from ..figures import FigureFlag
from ..language import language
from ..markers import MARKER_RE
from ..prompts import load
from .base import ToolContext

__all__ = ["CLAIM_JUDGE_SECONDS", "ClaimReport", "check_claims", "claim_key"]

# The judge's requests for one section must answer within this; past it, its claims stay unchecked.
# Well inside the tool deadline and the finalization reserve's time (agent/defaults.py).
CLAIM_JUDGE_SECONDS = 45.0
# A refusal quotes at most this many claims; the rest are counted.
PROBLEMS_SHOWN = 6
SENTENCE_CHARS = 160
QUOTE_CHARS = 220
# Verdicts remembered for re-sent sentences (a run's sections rarely hold more).
REMEMBERED_VERDICTS = 2_000
_PROMPT_CHARS_PER_CLAIM = CLAIM_CHARS + 2 * AROUND_CHARS + 400


def claim_key(sentence: str, markers: list[str]) -> str:
    """What "the same claim again" means: the same words citing the same sources."""
    words = " ".join(plain_claim(sentence).split())
    return hashlib.sha256(f"{words}|{','.join(sorted(markers))}".encode()).hexdigest()[:24]


@dataclass
class ClaimReport:
    claims: list[ClaimCheck]
    refusal: str | None  # set when the body must not be saved yet

    def note(self) -> str:
        """What the tool result adds once the section is saved."""
        marked = [c for c in self.claims if c.marked]
        unchecked = sum(1 for c in self.claims if c.verdict == "unchecked")
        parts = []
        if marked:
            parts.append(f"{len(marked)} claim(s) marked for the reader as not supported by their source")
        if unchecked:
            parts.append(f"{unchecked} claim(s) could not be checked and are counted as unchecked")
        return f"\nClaim check: {'; '.join(parts)}." if parts else ""


def _judge_allowed(ctx: ToolContext, claims: int) -> bool:
    """Whether the run may spend a judge call now: never past a limit, the reserve included."""
    ledger = ctx.ledger
    if ledger is None:
        return True
    now = time.time()
    if ledger.decide(now).kind == "end" or ledger.seconds_to_end(now) < CLAIM_JUDGE_SECONDS:
        return False
    cap = ledger.budget.max_cost_usd
    if cap is None:
        return True
    batches = -(-claims // JUDGE_BATCH)
    prompt_tokens = (len(load("claim_check")) + claims * _PROMPT_CHARS_PER_CLAIM) // 4
    estimate = ctx.model.small_caps.cost_usd(prompt_tokens, batches * JUDGE_MAX_TOKENS, 0, 0, 0)
    return ledger.cost_usd + estimate <= cap


def _remembered(ctx: ToolContext) -> dict[str, ClaimCheck]:
    """Verdicts this run already has: its own checks, and every section's claims (a continuation's inherited ones)."""
    known = dict(ctx.claim_verdicts)
    for section in ctx.sections.values():
        for claim in section.claims:
            if claim.verdict != "unchecked" and 0 <= claim.start < claim.end <= len(section.body):
                known.setdefault(claim_key(section.body[claim.start : claim.end], claim.markers), claim)
    return known


def _remember(ctx: ToolContext, key: str, claim: ClaimCheck) -> None:
    if claim.verdict == "unchecked":
        return
    ctx.claim_verdicts[key] = claim
    while len(ctx.claim_verdicts) > REMEMBERED_VERDICTS:
        del ctx.claim_verdicts[next(iter(ctx.claim_verdicts))]


def _describe(sentence: str, claim: ClaimCheck) -> str:
    quoted = claim.anchor is not None and "“" not in claim.differs  # the rules' reason may quote it already
    said = (
        f" [{claim.anchor.marker}] says: “{shorten(claim.anchor.quote, QUOTE_CHARS)}”"
        if quoted and claim.anchor
        else ""
    )
    verdict = "only partly supported" if claim.verdict == "partial" else "not supported"
    why = f" ({claim.differs})" if claim.differs else ""
    return f'"{shorten(plain_claim(sentence), SENTENCE_CHARS)}" is {verdict}{why}.{said}'


async def check_claims(body: str, ctx: ToolContext, figure_flags: list[FigureFlag]) -> ClaimReport:
    """The body's cited claims with their anchors and verdicts, or a refusal that says what to fix."""
    if not ctx.config.claim_check:
        return ClaimReport([], None)
    spans = []
    for span in claim_spans(body):
        markers = [m for m in dict.fromkeys(f"s{n}" for n in MARKER_RE.findall(span.text)) if ctx.registry.get(m)]
        if markers:
            spans.append((span, markers, claim_key(span.text, markers)))
    known = _remembered(ctx)
    fresh = [(span, markers, key) for span, markers, key in spans if key not in known]
    report_language = language(ctx.language)
    judge = ctx.model if fresh and _judge_allowed(ctx, len(fresh)) else None
    results = await check(
        [
            ToCheck(span.text, [s for m in markers if (s := ctx.registry.get(m)) is not None])
            for span, markers, _ in fresh
        ],
        language=report_language,
        judge=judge,
        calculations=ctx.calculations,
        question=ctx.goal_question,
        judge_seconds=CLAIM_JUDGE_SECONDS,
    )
    checked = dict(zip((key for _, _, key in fresh), results, strict=True))
    claims: list[ClaimCheck] = []
    problems: list[tuple[str, str, ClaimCheck]] = []
    insisted = {flag.sentence for flag in figure_flags}  # figures already marked: not refused twice
    for span, markers, key in spans:
        if key in checked:
            result = checked[key]
            claim = ClaimCheck(
                start=span.start,
                end=span.end,
                markers=markers,
                verdict=result.verdict,
                by=result.by,
                anchors=result.anchors,
                differs=result.differs,
            )
            _remember(ctx, key, claim)
        else:
            claim = known[key].model_copy(update={"start": span.start, "end": span.end, "marked": False})
        if claim.verdict in ("unsupported", "partial"):
            if key in ctx.claim_refusals or span.text in insisted:
                claim.marked = True
            else:
                problems.append((key, span.text, claim))
        claims.append(claim)
    if not problems:
        return ClaimReport(claims, None)
    ctx.claim_refusals.update(key for key, _, _ in problems)
    lines = [f"Not saved: {len(problems)} cited claim(s) are not supported by the sources they cite."]
    lines += [f"- {_describe(sentence, claim)}" for _, sentence, claim in problems[:PROBLEMS_SHOWN]]
    if len(problems) > PROBLEMS_SHOWN:
        lines.append(f"- … and {len(problems) - PROBLEMS_SHOWN} more.")
    lines.append(
        "For each: correct the claim to say what its source says, cite a passage that states it (read the page "
        "with read_page if you only have a snippet), or drop the claim. If a claim and its citation are right as "
        "written, send them again unchanged: the section is then saved with the claim marked for the reader as "
        "not found in its source."
    )
    return ClaimReport([], "\n".join(lines))
