"""Text built to hold a loop holds only its own message or run (issue 35, item 2), through the real
serve and worker processes and the fakes: while serve takes 40,000-character messages shaped against its command
patterns (the budget and re-check commands, in a DM, a mention and a thread reply), its /healthz
keeps answering at once and every other message is still handled. Before the fix one such DM held
serve's loop for ~7 s. And a page of unclosed title tags read by one run of a worker carrying two
leaves the loop they share on time (it stalled for ~13 s). tests/test_linear_patterns.py holds each pattern to linear time."""
from __future__ import annotations

import json
import re
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from redis import Redis

from jobs import RunStore
from tests.e2e.stack import CHANNEL, bot_replies, post_event, stack_environment, start
from tests.fakes.anthropic import Reply, tool_reply
from tests.fakes.policies import ResearchPolicy, side_reply, turn_of
from tests.fakes.slack import FakeSlack, app_mention_event, message_event
from tests.fakes.web import Page
from tests.processes import Stack, free_port, running, wait_for, wait_listening

FILL = 39_990
HOSTILE = (
    "budget a" + "\n" * FILL + "x",
    "budgets" + " " * FILL + "x",
    "recheck in" + "\n" * FILL + "x",
    "recheck" + " \n" * (FILL // 2) + "x",
)
# The bound for a health check held behind hostile text; the old code answered after seconds.
HEALTH_MEDIAN_SECONDS = 0.1
# One answer may be late on a loaded CI machine for reasons of its own; seconds late is the bug.
HEALTH_WORST_SECONDS = 1.5


def _health_times(base: str, stop: threading.Event, times: list[float]) -> None:
    with httpx.Client(timeout=30) as client:
        while not stop.is_set():
            started = time.perf_counter()
            assert client.get(f"{base}/healthz").status_code == 200
            times.append(time.perf_counter() - started)
            time.sleep(0.05)


def test_forty_thousand_characters_shaped_against_the_commands_hold_only_their_own_message(
        stack: Stack, fake_slack: FakeSlack) -> None:
    base = stack.events_url.removesuffix("/slack/events")
    times: list[float] = []
    stop = threading.Event()
    poller = threading.Thread(target=_health_times, args=(base, stop, times), daemon=True)
    poller.start()
    try:
        ours, _, _ = start(stack, fake_slack)  # a thread of ours, for the replies
        time.sleep(0.3)
        threads = []
        for text in HOSTILE:
            dm = message_event(text, channel="D0ANA", user="U0ANA", channel_type="im")
            threads.append(("D0ANA", fake_slack.seed_event(dm)))
            assert post_event(stack, dm).status_code == 200
            mention = app_mention_event(f"<@UBOT> {text}", channel=CHANNEL)
            threads.append((CHANNEL, fake_slack.seed_event(mention)))
            assert post_event(stack, mention).status_code == 200
            assert post_event(stack, message_event(text, channel=CHANNEL, thread_ts=ours)).status_code == 200
        # Each is answered with the length advice; nothing was started.
        for channel, ts in threads:
            replies = wait_for(lambda c=channel, t=ts: [m for m in fake_slack.thread(c, t) if m.ts != t], 20,
                               "the advice for a message too long")
            assert "characters" in replies[0].text, replies[0].text
        # Each reply in our thread too, before anything read it: no note, no continuation.
        advice = wait_for(lambda: len(said := [m for m in bot_replies(fake_slack, ours) if "characters" in m.text])
                          == len(HOSTILE) and said, 20, "the advice for each reply too long")
        assert all("I take up to 4,000" in m.text for m in advice)
        # An ordinary message after them is handled as ever.
        ordinary = message_event("usage", channel="D0ANA", user="U0ANA", channel_type="im")
        ts = fake_slack.seed_event(ordinary)
        assert post_event(stack, ordinary).status_code == 200
        wait_for(lambda: [m for m in fake_slack.thread("D0ANA", ts) if m.ts != ts], 20, "the usage answer")
        time.sleep(0.5)
    finally:
        stop.set()
        poller.join(10)
    assert len(times) >= 10, times
    assert statistics.median(times) < HEALTH_MEDIAN_SECONDS, times
    assert max(times) < HEALTH_WORST_SECONDS, times
    assert not any(bot_replies(fake_slack, t) == [] for c, t in threads if c == CHANNEL)


class ReadTheNamedPage:
    """Each run reads the page its question names at turn 2, then answers (a resumed run goes on)."""

    def __call__(self, request: dict[str, Any]) -> Reply:
        side = side_reply(request)
        if side is not None:
            return side
        messages, turn = request["messages"], turn_of(request)
        if (request.get("tool_choice") or {}).get("type") == "none" or turn >= 3:
            return ResearchPolicy().final(messages)
        if turn == 2:
            url = NAMED_PAGE.search(json.dumps(messages[0]))
            assert url, "the question names its page"
            return tool_reply(("read_page", {"url": url.group(0), "goal": "the expense ratio"}))
        return tool_reply(("web_search", {"query": "expense ratio"}))


NAMED_PAGE = re.compile(r"http://127\.0\.0\.1:\d+/(?:slow|titles)")
# Readable text, then 20,000 unclosed `<titles>` tags (160 KB): the old title pattern scanned to the end
# from each of them, ~13 s on the loop the worker's runs share; lxml reads the text as usual.
HOSTILE_PAGE = (b"<html><body>" + b"<p>The expense ratio is 0.03% a year for this fund.</p>" * 40
                + b"<titles>" * 20_000 + b"</body></html>")
# The bound for another run's loop lag (p99); a timer late by seconds is the bug.
LAG_P99_SECONDS = 0.1
LAG_WORST_SECONDS = 2.5


def _lag_buckets(port: int) -> dict[float, float]:
    answer = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {float(le): float(count) for le, count in
            re.findall(r'deepthread_event_loop_lag_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)', answer)}


def _scraped(port: int) -> dict[float, float] | None:
    """The lag histogram once the worker serves it (it may start after serve took the mentions)."""
    try:
        buckets = _lag_buckets(port)
    except httpx.HTTPError:
        return None
    return buckets if float("inf") in buckets else None


def test_a_page_of_unclosed_title_tags_holds_no_other_run_of_a_shared_worker(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    fake_web.add_page("/titles", Page(HOSTILE_PAGE, title="t"))
    fake_web.slow_seconds = 4  # the other run waits on its page meanwhile, as runs do
    fake_model.policy = ReadTheNamedPage()
    env = {**stack_environment(redis_url, fake_slack, fake_model, fake_web), "DEEPTHREAD_WORKER_RUNS": "2"}
    port, metrics = free_port(), free_port()
    store = RunStore(Redis.from_url(redis_url))
    with running(["serve"], {**env, "PORT": str(port)}, tmp_path / "serve.log") as serve, \
            running(["worker"], {**env, "DEEPTHREAD_METRICS_PORT": str(metrics)}, tmp_path / "worker.log"):
        base = wait_listening(port, serve, tmp_path / "serve.log")
        stack = Stack(events_url=f"{base}/slack/events", env=env, logs=tmp_path)
        for page in ("slow", "titles"):
            envelope = app_mention_event(f"expense ratio, as on {fake_web.url}/{page}", channel=CHANNEL)
            fake_slack.seed_event(envelope)
            assert post_event(stack, envelope).status_code == 200
        run_ids = wait_for(lambda: len(ids := store.active_ids()) == 2 and ids, 30, "both runs")
        # The lag from here on: the worker's own start-up, beside serve's on a loaded machine, is not the test.
        before = wait_for(lambda: _scraped(metrics), 30, "the worker's metrics")
        assert not any(path == "/titles" for _, path in fake_web.requests), "the hostile page is read after this"
        wait_for(lambda: all(store.get(r).status.finished for r in run_ids), 90, "both runs to end")
        assert any(path == "/titles" for _, path in fake_web.requests), "the hostile page was read"
        assert any("0.03%" in s.passage for r in run_ids for s in store.get(r).sources.values()), "its text read"
        buckets = {le: count - before.get(le, 0.0) for le, count in _lag_buckets(metrics).items()}
    everything = buckets[float("inf")]
    assert everything > 10, buckets
    # p99 under 100 ms: at most 1 % of the timers late by more, and with fewer than 100 samples one (a
    # loaded CI machine's scheduler may delay any single timer; the old stall was every run's 13 s).
    late = everything - buckets[LAG_P99_SECONDS]
    assert late <= max(1, everything // 100), buckets
    assert buckets[max(le for le in buckets if le <= LAG_WORST_SECONDS)] == everything, buckets
