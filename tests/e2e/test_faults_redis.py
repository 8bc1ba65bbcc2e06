"""Fault: Redis restarts while a run is researching (with an append-only file, as production
runs it). Real `deepthread serve` and `deepthread worker` processes, a real redis-server that
the test stops and starts again on the same port and data directory.

serve, the worker and the running job reconnect with backoff; the run finishes; no section,
source or revision is lost; a mention that arrives while Redis is down is not lost silently.
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from jobs import RunStore
from tests.e2e.stack import CHANNEL, block_text, bot_replies, post_event
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import MARKER, FaultAtTurnThree
from tests.fakes.slack import FakeSlack, app_mention_event
from tests.processes import RedisWithAOF, Stack, deepthread_stack, wait_for

# Longer than redis-py's own default retries last (at most ~5 s), so only the reconnect patience
# of serve, the worker and the job (bot/cli/processes.py; ~17 s at least) carries a process through.
DOWN_SECONDS = 8.0


def restart_in_background(redis: RedisWithAOF, down_for: float) -> threading.Thread:
    """Stop Redis now (SIGTERM, as a deploy does); start it again `down_for` seconds later."""
    redis.stop()

    def start_later() -> None:
        time.sleep(down_for)
        redis.start()

    thread = threading.Thread(target=start_later, name="redis-restart", daemon=True)
    thread.start()
    return thread


@pytest.fixture
def stack(tmp_path: Path, redis_aof: RedisWithAOF, fake_slack, fake_model, fake_web) -> Iterator[Stack]:
    with deepthread_stack(tmp_path, redis_url=redis_aof.url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url) as s:
        yield s




def test_a_run_survives_redis_restarting_mid_run_and_loses_nothing(
        stack: Stack, redis_aof: RedisWithAOF, fake_slack: FakeSlack, fake_model: FakeAnthropic) -> None:
    restarts: list[threading.Thread] = []
    fake_model.policy = FaultAtTurnThree(lambda: restarts.append(restart_in_background(redis_aof, DOWN_SECONDS)))
    envelope = app_mention_event("expense ratio and tracking error of VTI ITOT SCHB", channel=CHANNEL)
    thread = fake_slack.seed_event(envelope)
    post_event(stack, envelope)
    run_id = wait_for(lambda: RunStore(Redis.from_url(redis_aof.url)).active_ids(), 20, "the run to start")[0]

    replies = wait_for(lambda: len(bot_replies(fake_slack, thread)) >= 2 and bot_replies(fake_slack, thread), 20,
                       "progress and report")
    progress, report = replies[0], replies[1]
    wait_for(lambda: restarts and not restarts[0].is_alive(), 40, "Redis to go down and come back")
    wait_for(lambda: "Final" in block_text(fake_slack.message(CHANNEL, report.ts)), 60,
             "the final report after the restart")

    text = block_text(fake_slack.message(CHANNEL, report.ts))
    assert "*1. Fees*  _revised ×1_" in text and "*2. Tracking*" in text, "both sections, the revision counted"
    assert "Done" in block_text(fake_slack.message(CHANNEL, progress.ts))
    state = RunStore(Redis.from_url(redis_aof.url)).get(run_id)
    seen = {m.strip("[]") for r in fake_model.requests for m in MARKER.findall(json.dumps(r["messages"]))}
    assert seen <= set(state.sources), f"sources lost: {sorted(seen - set(state.sources))}"
    fees = next(s for s in state.sections if s.title == "Fees")
    assert [r.reason for r in fees.revisions] == ["a newer fact sheet"], "the revision and its reason survive"
    assert state.status.value == "completed"
    assert len(bot_replies(fake_slack, thread)) == 2, "no duplicate progress or report after the reconnect"


def test_a_mention_while_redis_is_down_starts_once_redis_is_back(
        stack: Stack, redis_aof: RedisWithAOF, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    restart = restart_in_background(redis_aof, DOWN_SECONDS)
    envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=CHANNEL)
    thread = fake_slack.seed_event(envelope)
    assert post_event(stack, envelope).status_code == 200, "Slack still gets its ack within 3 s"
    restart.join()
    replies = wait_for(lambda: len(bot_replies(fake_slack, thread)) >= 2 and bot_replies(fake_slack, thread), 40,
                       "the run to start once Redis is back")
    wait_for(lambda: "Final" in block_text(fake_slack.message(CHANNEL, replies[1].ts)), 60, "its final report")




def test_a_mention_while_redis_stays_down_is_answered_with_try_again(
        stack: Stack, redis_aof: RedisWithAOF, fake_slack: FakeSlack) -> None:
    redis_aof.stop()
    envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=CHANNEL)
    thread = fake_slack.seed_event(envelope)
    assert post_event(stack, envelope).status_code == 200
    reply = wait_for(lambda: bot_replies(fake_slack, thread), 50, "a reply in the thread")
    assert re.search(r"\b(try|ask) again\b", reply[0].text, re.IGNORECASE), reply[0].text
