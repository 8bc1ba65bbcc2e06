"""`deepthread eval`: run a question set, grade each report, write the scorecard."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from pydantic import BaseModel

from agent import model_api
from jobs import JobRuntime

from .bench_export import BenchArticle, bench_id, write_bench_jsonl
from .compare import SCORECARD_JSON, comparison_markdown, load_baseline
from .markdown import pct, scorecard_markdown
from .progress import ProgressBar
from .questions import EvalQuestion
from .runner import measure
from .scorecard import QuestionResult, Scorecard, totals_of

__all__ = ["EvalOptions", "THINKING_DIRS", "compare_thinking", "run_eval"]

# --compare-thinking: the same questions with thinking off, then on, each run's scorecard in its
# own directory; the "on" scorecard carries the side-by-side comparison with the "off" one.
THINKING_DIRS = {False: "thinking-off", True: "thinking-on"}

SCORECARD_MD = "scorecard.md"
REPORTS_DIR = "reports"


class EvalOptions(BaseModel):
    questions_file: Path
    out_dir: Path
    concurrency: int = 3
    judge_model: str
    baseline: Path | None = None
    deepresearch_bench: Path | None = None


def _write(card: Scorecard, options: EvalOptions, baseline: Scorecard | None) -> None:
    (options.out_dir / SCORECARD_JSON).write_text(json.dumps(card.model_dump(mode="json"), indent=2), encoding="utf-8")
    lines = scorecard_markdown(card)
    if baseline and options.baseline:
        lines += comparison_markdown(baseline, card, options.baseline)
    (options.out_dir / SCORECARD_MD).write_text("\n".join(lines), encoding="utf-8")


async def run_eval(questions: list[EvalQuestion], runtime: JobRuntime, options: EvalOptions) -> Scorecard:
    """Measure every question, a few at a time, and write the scorecard (and exports) to disk.

    The scorecard is rewritten as each question finishes, so an eval stopped after an hour
    still leaves the measurements it made."""
    baseline = load_baseline(options.baseline) if options.baseline else None  # fail before spending money
    reports_dir = options.out_dir / REPORTS_DIR
    reports_dir.mkdir(parents=True, exist_ok=True)
    progress = ProgressBar(len(questions), sys.stderr)
    gate = asyncio.Semaphore(options.concurrency)
    measured: dict[int, tuple[QuestionResult, str]] = {}
    started = time.monotonic()

    def card() -> Scorecard:
        results = [measured[i][0] for i in sorted(measured)]
        return Scorecard(
            questions_file=str(options.questions_file),
            model=runtime.agent.main_model,
            judge_model=options.judge_model,
            thinking=runtime.agent.thinking,
            planned=len(questions),
            wall_seconds=round(time.monotonic() - started, 3),
            results=results,
            totals=totals_of(results),
        )

    async with model_api(runtime.provider_config()) as client:

        async def one(index: int, question: EvalQuestion) -> None:
            async with gate:
                measured[index] = await measure(question, runtime, client, options.judge_model, reports_dir, progress)
            _write(card(), options, baseline)

        await asyncio.gather(*(one(i, q) for i, q in enumerate(questions)))

    final = card()
    if options.deepresearch_bench:
        write_bench_jsonl(
            options.deepresearch_bench,
            [
                BenchArticle(id=bench_id(q.id), prompt=q.question, article=measured[i][1])
                for i, q in enumerate(questions)
                if measured[i][1]
            ],
        )
    t = final.totals
    print(
        f"Citation support {pct(t.citation_support)} of {t.cited_sentences} cited sentences · "
        f"{t.facts_stated}/{t.facts} facts stated · {t.figures_flagged} figures flagged · "
        f"est. ${t.cost_usd + t.judge_cost_usd:.2f}. Scorecard: {options.out_dir / SCORECARD_MD}"
    )
    return final


async def compare_thinking(questions: list[EvalQuestion], runtime: JobRuntime, options: EvalOptions) -> Scorecard:
    """Run the set with thinking off, then on, on the same questions; the second scorecard compares."""
    off_dir = options.out_dir / THINKING_DIRS[False]
    card: Scorecard | None = None
    for thinking in (False, True):
        agent = runtime.agent.model_copy(update={"thinking": thinking})
        mode = replace(runtime, agent=agent)
        out = options.out_dir / THINKING_DIRS[thinking]
        card = await run_eval(
            questions, mode, options.model_copy(update={"out_dir": out, "baseline": off_dir if thinking else None})
        )
    assert card is not None
    return card
