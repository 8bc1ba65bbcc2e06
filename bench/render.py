"""What a sync of a long report costs serve: the report's message and canvas rendered at each sync.

    .venv/bin/python -m bench.render [--sections 20] [--syncs 5]

For three reports of `--sections` sections of ~12,000 characters each (ordinary prose with footnote
marks and bold, one dense with bracket runs, one of one-line list items), it renders the report's
message and canvas `--syncs` times as the publisher does at each sync, then once more with one
section added, with the conversion memo (bot/slack/conversion_memo.py) and, as the baseline in the
same run, without it (a memo that keeps nothing). Prints the first sync, the median later sync and
the sync after a new section, each in milliseconds of CPU on the calling thread.
Passes when, with the memo, a later sync costs at most a fifth of the first for every report.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from agent import SectionWritten, Source, SourceAdded
from bench.common import report_checks
from bot.publishing.canvas_render import render_canvas
from bot.publishing.report_render import render_report
from bot.slack import canvas_markdown, mrkdwn
from bot.slack.conversion_memo import ConversionMemo
from jobs import Run, RunState
from jobs.records.state import apply_event

SECTION_CHARS = 12_000  # agent/tools/report_tools.py MAX_SECTION_CHARS
GOAL_LATER_SHARE = 0.2  # a later sync at most a fifth of the first: only what changed is converted
REPORTS = {
    "prose": ("The fund's expense ratio is **0.03%** a year [s1]. ", "Its tracking difference was small [s2][s3]. "),
    "brackets": ("Fees [s1] fell. ", "[" * 30 + "]" * 30),
    "list items": ("Fees [s1] fell. ", "- [\n"),
}


def report_of(kind: str, sections: int, seed: int) -> RunState:
    rnd = random.Random(seed)
    state = RunState(run=Run(channel="C1", thread_ts="1.0", requester="U1", question="What do index funds cost?"))
    for i in range(1, 21):
        source = Source(marker=f"s{i}", url=f"https://site{i}.example/fees", title=f"Fees {i}", passage="0.03%")
        state = apply_event(state, SourceAdded(source=source))
    for k in range(1, sections + 1):
        body = ""
        while len(body) < SECTION_CHARS - 100:
            body += rnd.choice(REPORTS[kind])
        state = apply_event(state, SectionWritten(section_id=f"sec{k}", title=f"Part {k}", body=body[:SECTION_CHARS]))
    return state


def _sync(state: RunState) -> float:
    started = time.thread_time()
    render_report(state)
    render_canvas(state)
    return (time.thread_time() - started) * 1000


@contextmanager
def memo(keep: bool) -> Iterator[None]:
    """Fresh memos for both converters; `keep=False`: they keep nothing (the code before the memo)."""
    saved = mrkdwn._MEMO, canvas_markdown._MEMO, mrkdwn._paragraph_texts
    size = 8_000_000 if keep else 0
    mrkdwn._MEMO = ConversionMemo(mrkdwn._convert, max_chars=size)
    canvas_markdown._MEMO = ConversionMemo(canvas_markdown._convert, max_chars=size)
    mrkdwn._paragraph_texts.cache_clear()
    if not keep:  # the first sentences of the index, parsed again at each call as before
        mrkdwn._paragraph_texts = mrkdwn._paragraph_texts.__wrapped__  # type: ignore[assignment]
    try:
        yield
    finally:
        mrkdwn._MEMO, canvas_markdown._MEMO, mrkdwn._paragraph_texts = saved


def measure(state: RunState, syncs: int, keep: bool) -> tuple[float, float, float]:
    grown = apply_event(state, SectionWritten(section_id="new", title="New", body=state.sections[0].body[::-1]))
    with memo(keep):
        times = [_sync(state) for _ in range(syncs)]
        after = _sync(grown)
    return times[0], statistics.median(times[1:]), after


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", type=int, default=20)
    parser.add_argument("--syncs", type=int, default=5)
    args = parser.parse_args()
    print(f"render: {args.sections} sections of ~{SECTION_CHARS:,} characters, {args.syncs} syncs, "
          "report message and canvas (CPU ms on this thread)\n")
    print(f"  {'report':<11} {'':<9} {'first sync':>11} {'later sync':>11} {'a section more':>15}")
    checks = []
    for seed, kind in enumerate(REPORTS):
        state = report_of(kind, args.sections, seed)
        ours = measure(state, args.syncs, keep=True)
        base = measure(state, args.syncs, keep=False)
        for label, (first, later, more) in (("memo", ours), ("no memo", base)):
            print(f"  {kind:<11} {label:<9} {first:>9.0f} ms {later:>9.0f} ms {more:>13.0f} ms")
        checks.append((f"{kind}: later sync ÷ first sync, with the memo", f"{ours[1] / ours[0]:.3f} "
                       f"(baseline {base[1] / base[0]:.2f})", ours[1] <= GOAL_LATER_SHARE * ours[0],
                       f"≤ {GOAL_LATER_SHARE}"))
    print()
    return report_checks(checks)


if __name__ == "__main__":
    sys.exit(main())
