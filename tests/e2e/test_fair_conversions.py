"""In a shared worker (DEEPTHREAD_WORKER_RUNS), one run's documents do not starve another's: while
one run converts ten slow PDFs, another run's small CSV still reads within seconds. Real serve and
worker, the fake Slack serving the files, the real converter child."""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from tests.e2e.stack import CHANNEL, block_text, bot_replies, fleet, post_event, stack_environment
from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply, tool_reply
from tests.fakes.file_reader import extract_file, is_file_extraction, is_ranking, rank
from tests.fakes.pdf import make_pdf
from tests.fakes.policies import _text, side_reply, turn_of
from tests.fakes.slack import FakeSlack, app_mention_event
from tests.fakes.slack_files import share_file
from tests.processes import wait_for

# About a second and a half of conversion each (300 full pages): ten of them one after another
# held an unfair worker's only slot for well over the bound below.
SLOW_PDF = make_pdf([[f"the fund's expense ratio and its tracking difference were reported {j} {i}"
                      for j in range(90)] for i in range(300)])
CSV = b"Fund,Expense ratio,As of\nVTI,0.03%,2024-06-30\nSCHB,0.03%,2024-03-31\n"
BOUND_SECONDS = 5.0


class ReadEveryFile:
    """Each run reads every file its opening lists at once, then answers; it notes when the small
    run asked for its CSV and when the result came back."""

    def __init__(self) -> None:
        self.asked: dict[str, float] = {}
        self.read: dict[str, float] = {}
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_file_extraction(request):
            return extract_file(request)
        if is_ranking(request):
            return rank(request)
        side = side_reply(request)
        if side is not None:
            return side
        opening, turn = _text(request["messages"][0]), turn_of(request)
        run = "small" if "fee sheet" in opening else "busy"
        with self.lock:
            if turn == 1:
                self.asked.setdefault(run, time.monotonic())
                ids = re.findall(r"^- (F\d+) · ", opening, re.M)
                return tool_reply(*[("read_file", {"file": i, "goal": "expense ratio"}) for i in ids])
            self.read.setdefault(run, time.monotonic())
        return text_reply("<summary>The expense ratio was 0.03%.</summary>")


def test_another_runs_small_file_reads_within_seconds_while_one_run_converts_ten_slow_pdfs(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    policy = ReadEveryFile()
    fake_model.policy = policy
    env = {**stack_environment(redis_url, fake_slack, fake_model, fake_web), "DEEPTHREAD_WORKER_RUNS": "2"}
    with fleet(tmp_path, env, serves=1, workers=1) as running:
        stack = running.serves[0][1]
        busy = app_mention_event("What do the annual reports say about fees?", channel=CHANNEL)
        busy_thread = fake_slack.seed_event(busy)
        for n in range(10):
            share_file(fake_slack, CHANNEL, busy_thread, f"annual-report-{n}.pdf", SLOW_PDF)
        assert post_event(stack, busy).status_code == 200
        wait_for(lambda: len(fake_slack.__dict__.get("file_downloads", [])) >= 3, 60, "the busy run converting")

        small = app_mention_event("What does SCHB cost per our fee sheet?", channel=CHANNEL)
        small_thread = fake_slack.seed_event(small)
        share_file(fake_slack, CHANNEL, small_thread, "fees.csv", CSV)
        assert post_event(stack, small).status_code == 200
        wait_for(lambda: "small" in policy.read, 60, "the small run's file read")
        took = policy.read["small"] - policy.asked["small"]
        assert took < BOUND_SECONDS, f"the small run's CSV took {took:.1f} s behind the busy run's PDFs"
        assert "busy" not in policy.read, "the busy run was still converting: the small run did not wait it out"
        wait_for(lambda: any("Done" in block_text(m) for m in bot_replies(fake_slack, small_thread)), 30,
                 "the small run to finish while the busy one still converts")
