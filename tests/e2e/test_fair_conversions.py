"""In a shared worker (DEEPTHREAD_WORKER_RUNS), one run's documents do not starve another's: while
one run converts ten slow PDFs, another run's small CSV still reads within seconds; while one run
extracts many big web pages in the worker's pool, another run's page waits for one extraction at most.
Real serve and worker, the fake Slack serving the files, the fake web the pages, the real converter
child and extraction pool."""
from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from tests.e2e.stack import CHANNEL, block_text, bot_replies, fleet, post_event, stack_environment
from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply, tool_reply
from tests.fakes.file_reader import extract_file, is_file_extraction, is_ranking, rank
from tests.fakes.pdf import make_pdf
from tests.fakes.policies import _text, extract, is_extraction, side_reply, turn_of
from tests.fakes.slack import FakeSlack, app_mention_event
from tests.fakes.slack_files import share_file
from tests.fakes.web import Page
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


# --- web pages: the offload pool's processes, shared by run (agent/offload.py) -------------------

# Each big page holds a pool process for about a second (trafilatura on ~600 KB of paragraphs); the
# busy run reads enough of them to queue several deep on every process the worker's pool has.
POOL = os.cpu_count() or 2  # the worker's pool: a process per core (agent/offload.py)
BIG_PAGES = 4 * POOL + 4


def big_page(tag: str) -> Page:
    paragraphs = "".join(f"<p>Paragraph {i} of {tag} says the fund's expense ratio was {i / 1000:.3f}% in "
                         f"{2000 + i % 25}. <a href='/more/{i}'>more {i}</a></p>\n" for i in range(5_000))
    return Page(f"<html><head><title>{tag}</title></head><body><article><h1>{tag}</h1>{paragraphs}"
                "</article></body></html>")


SMALL_PAGE = Page("<html><head><title>Fee sheet</title></head><body><article><h1>Fee sheet</h1><p>Small page "
                  "says the fund's expense ratio was 0.03% in 2024, as its fee sheet shows.</p></article></body></html>")


class ReadEveryPage:
    """Each run reads every page its question names at once, then answers. Notes when the small run
    asked for its page, and when each page's first extraction request came (its text, out of the pool)."""

    def __init__(self) -> None:
        self.asked_small = 0.0
        self.extracted: dict[str, float] = {}
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            page = _text(request["messages"][-1])
            with self.lock:
                for tag in set(re.findall(r"(busy page \d+|Small page)", page)):
                    self.extracted.setdefault(tag, time.monotonic())
            return extract(request)
        side = side_reply(request)
        if side is not None:
            return side
        opening, turn = _text(request["messages"][0]), turn_of(request)
        if turn > 1:
            return text_reply("<summary>The expense ratio was 0.03%.</summary>")
        urls = re.findall(r"https?://127\.0\.0\.1:\d+/(?:big|small)/[\w-]+", opening)
        if "/small/" in " ".join(urls):
            with self.lock:
                self.asked_small = time.monotonic()
        return tool_reply(*[("read_page", {"url": u, "goal": "the fund's expense ratio"}) for u in dict.fromkeys(urls)])


def test_another_runs_page_waits_at_most_one_extraction_while_one_run_reads_many_big_pages(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    policy = ReadEveryPage()
    fake_model.policy = policy
    busy_urls = [fake_web.url + fake_web.add_page(f"/big/{n}", big_page(f"busy page {n}")) for n in range(BIG_PAGES)]
    small_url = fake_web.url + fake_web.add_page("/small/fees", SMALL_PAGE)
    env = {**stack_environment(redis_url, fake_slack, fake_model, fake_web), "DEEPTHREAD_WORKER_RUNS": "2"}
    with fleet(tmp_path, env, serves=1, workers=1) as running:
        stack = running.serves[0][1]
        busy = app_mention_event(f"What do these pages say about fees? {' '.join(busy_urls)}", channel=CHANNEL)
        fake_slack.seed_event(busy)
        assert post_event(stack, busy).status_code == 200
        wait_for(lambda: any(t.startswith("busy") for t in policy.extracted), 90, "the busy run's first page read")

        small = app_mention_event(f"What does {small_url} say about the fee?", channel=CHANNEL)
        small_thread = fake_slack.seed_event(small)
        assert post_event(stack, small).status_code == 200
        wait_for(lambda: "Small page" in policy.extracted, 90, "the small run's page read")
        with policy.lock:
            asked, read = policy.asked_small, policy.extracted["Small page"]
            between = sorted(t for t, at in policy.extracted.items() if t.startswith("busy") and asked < at < read)
            done_before = sum(t.startswith("busy") and at <= asked for t, at in policy.extracted.items())
        # The pool's processes were busy with the busy run's pages when the small run's came: it took the
        # first to come free (each busy page under way may end first; one more finishing at that moment).
        assert len(between) <= POOL + 1, f"the small run's page waited behind {len(between)} busy pages: {between}"
        assert BIG_PAGES - done_before - len(between) >= 4, "the busy run still had pages queued behind it"
        wait_for(lambda: any("Done" in block_text(m) for m in bot_replies(fake_slack, small_thread)), 60,
                 "the small run to finish")
