"""The scorecard as Markdown a team reads: the headline, a row per question, what went wrong."""

from __future__ import annotations

from .scorecard import QuestionResult, Scorecard, Totals

__all__ = ["duration", "pct", "scorecard_markdown"]

# The Markdown lists at most this many unsupported sentences and flags; the JSON has them all.
LISTED_MAX = 30
SENTENCE_CHARS = 200


def pct(share: float | None) -> str:
    return "–" if share is None else f"{share:.0%}"


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SENTENCE_CHARS else text[: SENTENCE_CHARS - 1] + "…"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def headline(t: Totals, wall_seconds: float) -> list[str]:
    rubric = (
        f"{t.rubric_relative:.2f} on {t.rubric_graded} question(s) with a reference (0.50 = as good as the reference)"
        if t.rubric_relative is not None
        else "– (no question has a reference)"
    )
    per_question = t.requests / t.questions if t.questions else 0
    return [
        "| measure | result |",
        "|---|---|",
        (
            f"| **Citation support** | **{pct(t.citation_support)}** of {t.cited_sentences} cited sentences supported by "
            f"their cited passages ({t.partly} partly, {t.not_supported} not supported) |"
        ),
        f"| Reference facts stated | {t.facts_stated} of {t.facts} ({t.facts_contradicted} contradicted) |",
        f"| Figure check | {t.figures_checked} figures checked against their sources · {t.figures_flagged} flagged |",
        (
            f"| Claim check (the runs' own) | {pct(t.claims.share_supported)} of {t.claims.checked} cited claims "
            f"supported ({t.claims.partial} partly, {t.claims.unsupported} not, {t.claims.unchecked} unchecked) |"
        ),
        f"| Rubric against reference | {rubric} |",
        f"| Cost | est. ${t.cost_usd:.2f} research + ${t.judge_cost_usd:.2f} judging |",
        f"| Model requests | {t.requests} ({per_question:.0f} per question) · {t.thinking_tokens:,} thinking tokens |",
        f"| Time | {duration(t.seconds_median)} per question (median) · {duration(wall_seconds)} for the whole eval |",
        f"| Runs | {t.completed} of {t.questions} completed · {t.errors} not fully measured |",
    ]


def _row(r: QuestionResult) -> str:
    support = f"{pct(r.citation_support)} of {len(r.sentences)}" if r.sentences else "– (none cited)"
    facts = f"{r.facts_stated}/{len(r.facts)}" if r.facts else "–"
    rubric = f"{r.rubric.relative:.2f}" if r.rubric else "–"
    if r.status == "error" or "citations" in r.ungraded:
        support = "– (not graded)"
    if "facts" in r.ungraded:
        facts = "not graded"
    if "rubric" in r.ungraded:
        rubric = "not graded"
    claims = f"{pct(r.claims.share_supported)} of {r.claims.checked}" if r.claims.checked else "–"
    return (
        f"| {_cell(r.id)} | {_cell(r.kind or '')} | {r.status} | {claims} | {support} | {facts} | "
        f"{len(r.flags)} of {r.figures_checked} | {rubric} | {r.requests} | ${r.cost_usd:.2f} | "
        f"{duration(r.seconds)} | {_cell(r.report_file)} |"
    )


def scorecard_markdown(card: Scorecard) -> list[str]:
    lines = [
        f"# Deepthread eval · {card.created_at:%Y-%m-%d %H:%M} UTC",
        "",
        (
            f"Model `{card.model}` · judge `{card.judge_model}` · {len(card.results)} question(s) from "
            f"`{card.questions_file}`"
        ),
        "",
    ]
    if card.planned > len(card.results):
        lines += [f"**Partial:** {len(card.results)} of {card.planned} questions measured so far.", ""]
    lines += headline(card.totals, card.wall_seconds) + [""]
    lines += [
        "## Per question",
        "",
        "| id | kind | run | claim check | citation support | facts | flagged figures | rubric | requests | cost | time "
        "| report |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(r) for r in card.results] + [""]
    unsupported = [(r, s) for r in card.results for s in r.sentences if s.verdict != "supported"]
    if unsupported:
        lines += ["## Cited sentences their passages do not fully support", ""]
        for r, s in unsupported[:LISTED_MAX]:
            verdict = "not supported" if s.verdict == "not_supported" else "partly"
            cites = " ".join(f"[{m}]" for m in s.markers)
            lines.append(f'- **{r.id}** · {s.where} · _{verdict}_: "{_short(s.sentence)}" — {cites}: {s.why}')
        if len(unsupported) > LISTED_MAX:
            lines.append(f"- … and {len(unsupported) - LISTED_MAX} more in scorecard.json")
        lines.append("")
    flagged = [(r, f) for r in card.results for f in r.flags]
    if flagged:
        lines += ["## Figures the figure check flagged", ""]
        for r, f in flagged[:LISTED_MAX]:
            lines.append(f'- **{r.id}**: {f.figure} in "{_short(f.sentence)}" — {f.why}')
        lines.append("")
    missed = [(r, f) for r in card.results for f in r.facts if f.verdict != "stated"]
    if missed:
        lines += ["## Reference facts not stated", ""]
        lines += [
            f"- **{r.id}** ({f.verdict}): {f.fact}" + (f" — {f.why}" if f.why else "") for r, f in missed[:LISTED_MAX]
        ]
        lines.append("")
    problems = [r for r in card.results if r.status != "completed" or r.judge_error]
    if problems:
        lines += ["## Runs that did not complete or were not fully graded", ""]
        for r in problems:
            parts = [f"run {r.status}" + (f": {r.reason}" if r.reason else "")]
            if r.judge_error:
                parts.append(f"judge: {r.judge_error}")
            lines.append(f"- **{r.id}**: " + " · ".join(parts))
        lines.append("")
    return lines
