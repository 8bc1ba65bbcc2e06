"""`--baseline DIR`: this scorecard beside an earlier one, measure by measure and question by question."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from bot.exceptions import BaselineError

from .markdown import duration, pct
from .scorecard import QuestionResult, Scorecard, Totals

__all__ = ["BaselineError", "comparison_markdown", "load_baseline"]

SCORECARD_JSON = "scorecard.json"


def load_baseline(directory: Path) -> Scorecard:
    path = directory / SCORECARD_JSON
    try:
        return Scorecard.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError as exc:
        raise BaselineError(
            f"{path} does not exist: give --baseline the output directory of an earlier `deepthread eval`"
        ) from exc
    except (ValueError, ValidationError) as exc:
        raise BaselineError(
            f"{path} is not a scorecard this version reads ({str(exc).splitlines()[0]}); "
            "run the baseline again with this version"
        ) from exc


def _points(before: float | None, now: float | None) -> str:
    if before is None or now is None:
        return "–"
    return f"{(now - before) * 100:+.0f} pts"


def _delta(before: float, now: float, fmt: Callable[[float], str]) -> str:
    if before == now:
        return "="
    sign = "+" if now > before else "−"
    return f"{sign}{fmt(abs(now - before))}" + (f" ({sign}{abs(now - before) / before:.0%})" if before else "")


def _totals_rows(b: Totals, n: Totals) -> list[str]:
    def rel(t: Totals) -> str:
        return f"{t.rubric_relative:.2f}" if t.rubric_relative is not None else "–"

    def money(value: float) -> str:
        return f"${value:.2f}"

    return [
        (
            f"| Citation support | {pct(b.citation_support)} of {b.cited_sentences} | {pct(n.citation_support)} of "
            f"{n.cited_sentences} | {_points(b.citation_support, n.citation_support)} |"
        ),
        f"| Not supported | {b.not_supported} | {n.not_supported} | {_delta(b.not_supported, n.not_supported, lambda v: f'{v:.0f}')} |",
        (
            f"| Reference facts stated | {b.facts_stated} of {b.facts} | {n.facts_stated} of {n.facts} | "
            f"{_points(b.facts_stated / b.facts if b.facts else None, n.facts_stated / n.facts if n.facts else None)} |"
        ),
        (
            f"| Figures flagged | {b.figures_flagged} of {b.figures_checked} | {n.figures_flagged} of {n.figures_checked} | "
            f"{_delta(b.figures_flagged, n.figures_flagged, lambda v: f'{v:.0f}')} |"
        ),
        (
            f"| Rubric against reference | {rel(b)} | {rel(n)} | "
            f"{'–' if b.rubric_relative is None or n.rubric_relative is None else f'{n.rubric_relative - b.rubric_relative:+.2f}'} |"
        ),
        f"| Research cost | ${b.cost_usd:.2f} | ${n.cost_usd:.2f} | {_delta(b.cost_usd, n.cost_usd, money)} |",
        f"| Model requests | {b.requests} | {n.requests} | {_delta(b.requests, n.requests, lambda v: f'{v:.0f}')} |",
        (
            f"| Thinking tokens | {b.thinking_tokens:,} | {n.thinking_tokens:,} | "
            f"{_delta(b.thinking_tokens, n.thinking_tokens, lambda v: f'{v:,.0f}')} |"
        ),
        (
            f"| Time per question (median) | {duration(b.seconds_median)} | {duration(n.seconds_median)} | "
            f"{_delta(b.seconds_median, n.seconds_median, duration)} |"
        ),
    ]


def _question_row(b: QuestionResult, n: QuestionResult) -> str:
    rubric = "–" if not (b.rubric and n.rubric) else f"{b.rubric.relative:.2f} → {n.rubric.relative:.2f}"
    facts = f"{b.facts_stated} → {n.facts_stated} of {len(n.facts)}" if n.facts else "–"
    return (
        f"| {n.id} | {pct(b.citation_support)} → {pct(n.citation_support)} | {facts} | "
        f"{len(b.flags)} → {len(n.flags)} | {rubric} | ${b.cost_usd:.2f} → ${n.cost_usd:.2f} | "
        f"{duration(b.seconds)} → {duration(n.seconds)} |"
    )


def _thinking(card: Scorecard) -> str:
    return "" if card.thinking is None else f" (thinking {'on' if card.thinking else 'off'})"


def comparison_markdown(baseline: Scorecard, now: Scorecard, baseline_dir: Path) -> list[str]:
    lines = [
        "## Compared with the baseline",
        "",
        f"Baseline: `{baseline_dir}` · {baseline.created_at:%Y-%m-%d %H:%M} UTC · model `{baseline.model}`"
        + _thinking(baseline)
        + f" · judge `{baseline.judge_model}`"
        + (" (a different judge: compare with care)" if baseline.judge_model != now.judge_model else ""),
        "",
    ]
    lines += ["| measure | baseline | now | change |", "|---|---|---|---|"]
    lines += _totals_rows(baseline.totals, now.totals) + [""]
    before = {r.id: r for r in baseline.results}
    shared = [r for r in now.results if r.id in before]
    if shared:
        lines += [
            "| id | citation support | facts stated | flagged figures | rubric | cost | time |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [_question_row(before[r.id], r) for r in shared] + [""]
    only_now = [r.id for r in now.results if r.id not in before]
    only_before = [i for i in before if i not in {r.id for r in now.results}]
    if only_now or only_before:
        lines.append(
            "Totals cover different questions: "
            + "; ".join(
                part
                for part in (
                    f"only now: {', '.join(only_now)}" if only_now else "",
                    f"only in the baseline: {', '.join(only_before)}" if only_before else "",
                )
                if part
            )
        )
        lines.append("")
    return lines
