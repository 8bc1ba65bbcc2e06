"""Helpers for end-to-end tests through real serve and worker processes and the fake Slack
(imported from here, never from another test module)."""
from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.fakes.policies import is_extraction
from tests.fakes.slack import FakeSlack, app_mention_event, sign
from tests.processes import (
    SIGNING_SECRET,
    STARTUP_SECONDS,
    Stack,
    environment,
    free_port,
    running,
    wait_for,
    wait_listening,
)

APP_TOKEN = "xapp-test"  # Socket Mode's app-level token
BOT_TOKEN = "xoxb-test"

CHANNEL = "C0TEST"


def post_event(stack: Stack, envelope: dict, *, headers: dict | None = None, secret: str = SIGNING_SECRET,
               timestamp: int | None = None) -> httpx.Response:
    body = json.dumps(envelope)
    signed = sign(secret, body, timestamp)
    return httpx.post(stack.events_url, content=body, headers={**signed, **(headers or {})}, timeout=10)


def block_text(message) -> str:
    parts = []
    for block in message.blocks or []:
        if block.get("type") == "section":
            parts.append(block["text"]["text"])
        elif block.get("type") == "context":
            parts += [e.get("text", "") for e in block["elements"]]
    return "\n".join(parts)


def bot_replies(slack: FakeSlack, thread_ts: str):
    return [m for m in slack.thread(CHANNEL, thread_ts) if m.ts != thread_ts]


def assert_cited_report_pinned(slack: FakeSlack, mention_ts: str, web_url: str, timeout: float = 30):  # noqa: ANN201
    """One progress reply and one pinned report in the thread; the report ends final and cited."""
    replies = wait_for(lambda: len(bot_replies(slack, mention_ts)) >= 2 and bot_replies(slack, mention_ts),
                       10, "progress and report replies")
    progress, report = replies[0], replies[1]
    # The pin is a call of its own, just after the report is posted.
    wait_for(lambda: [p.ts for p in slack.pins(CHANNEL)] == [report.ts], 5, "exactly the report pinned")
    wait_for(lambda: "Final" in block_text(slack.message(CHANNEL, report.ts)), timeout, "the final report")
    final = block_text(slack.message(CHANNEL, report.ts))
    assert not re.search(r"\[s\d+\]", final), final
    assert "*Sources*" in final and f"{web_url}/pages/" in final
    assert re.search(r"<http://127\.0\.0\.1:\d+/pages/[\w.-]+\|\[1\]>", final), "footnotes link to their source"
    assert "Done" in block_text(slack.message(CHANNEL, progress.ts))
    assert len(bot_replies(slack, mention_ts)) == 2, "progress is edited in place, not re-posted"
    return progress, report


def start(stack: Stack, slack: FakeSlack, text: str = "expense ratio VTI SCHB ITOT") -> tuple[str, str, str]:
    """Mention the bot; returns (thread ts, progress ts, report ts)."""
    envelope = app_mention_event(text, channel=CHANNEL)
    ts = slack.seed_event(envelope)
    assert post_event(stack, envelope).status_code == 200
    replies = wait_for(lambda: len(bot_replies(slack, ts)) >= 2 and bot_replies(slack, ts), 10, "run messages")
    return ts, replies[0].ts, replies[1].ts


def report_text(slack: FakeSlack, ts: str) -> str:
    return block_text(slack.message(CHANNEL, ts))


@contextmanager
def serve_only(env: dict[str, str], log: Path) -> Iterator[tuple[subprocess.Popen[bytes], Stack]]:
    port = free_port()
    env = {**env, "PORT": str(port)}
    with running(["serve"], env, log) as serve:
        base = wait_listening(port, serve, log)
        yield serve, Stack(events_url=f"{base}/slack/events", env=env, logs=log.parent)


def stack_environment(redis_url: str, fake_slack, fake_model, fake_web, *, hard_stop_seconds: float = 3) -> dict[str, str]:
    return environment(
        SLACK_BOT_TOKEN="xoxb-test", SLACK_SIGNING_SECRET="test-signing-secret", SLACK_API_URL=f"{fake_slack.url}/api/",
        ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=fake_model.url, REDIS_URL=redis_url, DEEPTHREAD_SEARCH="searxng",
        SEARXNG_URL=fake_web.url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1",
        DEEPTHREAD_HARD_STOP_SECONDS=str(hard_stop_seconds),
    )


def main_requests(fake_model) -> list[dict]:
    """The lead's Messages API requests (the small model's extraction passes left out)."""
    return [r for r in fake_model.requests if not is_extraction(r)]


@contextmanager
def socket_mode_stack(tmp: Path, fake_slack: FakeSlack, *, redis_url: str, model_url: str,
                      web_url: str, **extra: str) -> Iterator[Stack]:
    """`deepthread serve` in Socket Mode (no signing secret, nothing listening) and one worker;
    `extra` adds settings (DEEPTHREAD_…=…)."""
    env = environment(
        **extra,
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=f"{fake_slack.url}/api/",
        ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=model_url, REDIS_URL=redis_url,
        DEEPTHREAD_SEARCH="searxng", SEARXNG_URL=web_url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1",
        PORT=str(free_port()),
    )
    with running(["serve"], env, tmp / "serve.log") as serve, running(["worker"], env, tmp / "worker.log"):

        def connected() -> bool:
            if serve.poll() is not None:
                raise AssertionError("deepthread serve exited:\n" + (tmp / "serve.log").read_text())
            return fake_slack.socket_connections == 1

        try:
            wait_for(connected, STARTUP_SECONDS, "deepthread serve to open a Socket Mode connection")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nserve.log:\n{(tmp / 'serve.log').read_text()}") from None
        yield Stack(events_url="", env=env, logs=tmp)
