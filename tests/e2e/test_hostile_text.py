"""Text built to hold a loop holds only its own message (issue 35, item 2), through the real serve
process and the fake Slack: while serve takes 40,000-character messages shaped against its command
patterns (the budget and re-check commands, in a DM, a mention and a thread reply), its /healthz
keeps answering at once and every other message is still handled. Before the fix one such DM held
serve's loop for ~7 s. tests/test_linear_patterns.py holds each pattern to linear time."""
from __future__ import annotations

import statistics
import threading
import time

import httpx

from tests.e2e.stack import CHANNEL, bot_replies, post_event
from tests.fakes.slack import FakeSlack, app_mention_event, message_event
from tests.processes import Stack, wait_for

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
        time.sleep(0.3)
        threads = []
        for text in HOSTILE:
            dm = message_event(text, channel="D0ANA", user="U0ANA", channel_type="im")
            threads.append(("D0ANA", fake_slack.seed_event(dm)))
            assert post_event(stack, dm).status_code == 200
            mention = app_mention_event(f"<@UBOT> {text}", channel=CHANNEL)
            threads.append((CHANNEL, fake_slack.seed_event(mention)))
            assert post_event(stack, mention).status_code == 200
        # Each is answered with the length advice; nothing was started.
        for channel, ts in threads:
            replies = wait_for(lambda c=channel, t=ts: [m for m in fake_slack.thread(c, t) if m.ts != t], 20,
                               "the advice for a message too long")
            assert "characters" in replies[0].text, replies[0].text
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
