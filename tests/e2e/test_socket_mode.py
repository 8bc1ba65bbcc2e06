"""Socket Mode end to end: the real `deepthread serve` (slack_bolt's AsyncSocketModeHandler, the
aiohttp client of slack_sdk) connects to FakeSlack's Socket Mode endpoint, gets events as
envelopes, acks them, and survives Slack asking it to reconnect. Plus the fake's wire
protocol, checked frame by frame with a plain WebSocket client."""
from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import httpx
import pytest
from redis import Redis

from jobs import RunStore
from tests.e2e.stack import (
    APP_TOKEN,
    BOT_TOKEN,
    CHANNEL,
    assert_cited_report_pinned,
    block_text,
    bot_replies,
    socket_mode_stack,
)
from tests.fakes.server import ServerThread, free_port
from tests.fakes.slack import APP_ID, FakeSlack, app_mention_event
from tests.processes import STARTUP_SECONDS, Stack, environment, running, wait_for

# ------------------------------------------------------------ the fake itself


@pytest.fixture
def slack() -> Iterator[tuple[FakeSlack, ServerThread]]:
    fake = FakeSlack()
    with ServerThread(fake.app()) as server:
        yield fake, server


def open_connection(server: ServerThread, token: str | None = APP_TOKEN, **kwargs) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{server.url}/api/apps.connections.open", headers=headers, timeout=5, **kwargs).json()


def test_apps_connections_open_wants_an_app_level_token_in_the_header(slack: tuple[FakeSlack, ServerThread]) -> None:
    fake, server = slack
    assert open_connection(server, BOT_TOKEN) == {"ok": False, "error": "not_allowed_token_type"}
    assert open_connection(server, None) == {"ok": False, "error": "not_authed"}
    assert open_connection(server, None, data={"token": APP_TOKEN})["error"] == "not_authed"
    assert httpx.get(f"{server.url}/api/apps.connections.open",
                     headers={"Authorization": f"Bearer {APP_TOKEN}"}).json()["error"] == "insecure_request"
    opened = open_connection(server)
    assert opened["ok"] is True
    assert re.fullmatch(rf"ws://127\.0\.0\.1:{server.port}/socket/\w+", opened["url"]), opened
    # The bot-token methods still refuse an app-level token.
    assert httpx.post(f"{server.url}/api/auth.test",
                      headers={"Authorization": f"Bearer {APP_TOKEN}"}).json()["ok"] is False
    assert [m for m, _ in fake.calls].count("apps.connections.open") == 5


async def test_socket_protocol_hello_envelopes_acks_disconnect(slack: tuple[FakeSlack, ServerThread]) -> None:
    fake, server = slack
    envelope = app_mention_event("waiting for a connection", channel=CHANNEL)
    early = fake.send_socket_event(envelope)  # no connection yet: held for the first one
    assert fake.socket_backlog == 1

    url = open_connection(server)["url"]
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url) as ws:
            hello = await ws.receive_json(timeout=5)
            assert hello["type"] == "hello" and hello["num_connections"] == 1
            assert hello["connection_info"] == {"app_id": APP_ID} and "debug_info" in hello
            held = await ws.receive_json(timeout=5)
            assert held == {"envelope_id": early, "payload": envelope, "type": "events_api",
                            "accepts_response_payload": False, "retry_attempt": 0, "retry_reason": ""}
            assert fake.socket_connections == 1 and fake.socket_backlog == 0

            retry = fake.send_socket_event(envelope, retry_attempt=1, retry_reason="timeout")
            again = await ws.receive_json(timeout=5)
            assert again["envelope_id"] == retry != early
            assert (again["retry_attempt"], again["retry_reason"]) == (1, "timeout")

            await ws.send_str(json.dumps({"envelope_id": early}))
            await ws.send_str(json.dumps({"envelope_id": retry, "payload": {}}))
            wait_for(lambda: fake.socket_acks == [early, retry], 5, "the acks")

            assert fake.disconnect_sockets(close_after=0.2) == 1
            assert await ws.receive_json(timeout=5) == {"type": "disconnect", "reason": "refresh_requested",
                                                       "debug_info": {"host": "applink-fake"}}
            later = fake.send_socket_event(envelope)  # the old connection is retiring: held
            closing = await ws.receive(timeout=5)
            assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        wait_for(lambda: fake.socket_connections == 0, 5, "the old connection to close")
        assert fake.socket_backlog == 1

        with pytest.raises(aiohttp.WSServerHandshakeError):  # a URL is good for one connection
            await session.ws_connect(url)
        async with session.ws_connect(open_connection(server)["url"]) as ws:
            assert (await ws.receive_json(timeout=5))["type"] == "hello"
            assert (await ws.receive_json(timeout=5))["envelope_id"] == later
    assert fake.socket_connects == 2


# --------------------------------------------------------- the real processes


@pytest.fixture
def socket_stack(tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> Iterator[Stack]:
    with socket_mode_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url,
                           web_url=fake_web.url) as s:
        yield s


def acked(slack: FakeSlack, envelope_id: str, within: float = 3.0) -> None:
    """Slack wants the ack within 3 s, or it redelivers."""
    wait_for(lambda: envelope_id in slack.socket_acks, within, f"the ack of envelope {envelope_id}")


def test_mention_over_socket_mode_becomes_a_pinned_cited_report(
    socket_stack: Stack, fake_slack: FakeSlack, fake_web, redis_url: str
) -> None:
    assert fake_slack.calls_of("apps.connections.open"), "the app-level token went to SLACK_API_URL"
    assert fake_slack.socket_sent[0]["type"] == "hello"

    envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=CHANNEL)
    mention_ts = fake_slack.seed_event(envelope)
    acked(fake_slack, fake_slack.send_socket_event(envelope))

    _progress, report = assert_cited_report_pinned(fake_slack, mention_ts, fake_web.url, timeout=20)

    # Slack redelivers the same event in a new envelope: acked, and nothing new starts.
    posts_before = len(fake_slack.calls_of("chat.postMessage"))
    acked(fake_slack, fake_slack.send_socket_event(envelope, retry_attempt=1, retry_reason="timeout"))
    time.sleep(1.0)
    assert len(fake_slack.calls_of("chat.postMessage")) == posts_before
    assert len(RunStore(Redis.from_url(redis_url)).thread_run_ids(CHANNEL, mention_ts)) == 1, "one run in the thread"

    # Slack retires the connection: the app opens a new one, and a mention sent meanwhile
    # (held by Slack until then) still becomes a report.
    opened = len(fake_slack.calls_of("apps.connections.open"))
    assert fake_slack.disconnect_sockets() == 1
    second = app_mention_event("expense ratio VTI", channel=CHANNEL)
    second_ts = fake_slack.seed_event(second)
    second_id = fake_slack.send_socket_event(second)
    wait_for(lambda: fake_slack.socket_connects == 2 and fake_slack.socket_connections == 1, 10,
             "the app to reconnect and close its old connection")
    assert len(fake_slack.calls_of("apps.connections.open")) == opened + 1, "a fresh URL for the new connection"
    acked(fake_slack, second_id)
    replies = wait_for(lambda: len(bot_replies(fake_slack, second_ts)) >= 2 and bot_replies(fake_slack, second_ts),
                       10, "replies to the mention sent across the reconnection")
    wait_for(lambda: "Final" in block_text(fake_slack.message(CHANNEL, replies[1].ts)), 20, "the second final report")
    assert [p.ts for p in fake_slack.pins(CHANNEL)] == [report.ts, replies[1].ts]
    assert sorted(fake_slack.socket_acks) == sorted(f["envelope_id"] for f in fake_slack.socket_sent
                                                    if f.get("type") == "events_api"), "every envelope acked"


# ------------------------------------------ failures to connect

# slack_sdk's aiohttp SocketModeClient.connect() retries every failure forever (every
# ping_interval, 10 s here): serve proves the app-level token at start-up and races the
# connection against its stop signal.


@contextmanager
def serve_alone(tmp: Path, fake_slack: FakeSlack, redis_url: str) -> Iterator[subprocess.Popen[bytes]]:
    env = environment(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=f"{fake_slack.url}/api/",
                      ANTHROPIC_API_KEY="test-key", REDIS_URL=redis_url, PORT=str(free_port()))
    with running(["serve"], env, tmp / "serve.log", grace=2) as serve:
        yield serve


def test_a_rejected_app_token_stops_serve_with_a_clear_error(tmp_path: Path, fake_slack: FakeSlack,
                                                              redis_url: str) -> None:
    fake_slack.fail_next("apps.connections.open", times=1000, error="invalid_auth")  # a revoked xapp- token
    with serve_alone(tmp_path, fake_slack, redis_url) as serve:
        wait_for(lambda: serve.poll() is not None, STARTUP_SECONDS, "serve to give up on a rejected SLACK_APP_TOKEN")
        assert serve.returncode == 2
        assert "SLACK_APP_TOKEN" in (tmp_path / "serve.log").read_text()


def test_serve_stops_on_sigterm_while_it_cannot_connect(tmp_path: Path, fake_slack: FakeSlack,
                                                        redis_url: str) -> None:
    fake_slack.fail_next("apps.connections.open", times=1000, status=503)  # Slack having a bad day
    with serve_alone(tmp_path, fake_slack, redis_url) as serve:
        wait_for(lambda: fake_slack.calls_of("apps.connections.open"), 15, "a connection attempt")
        serve.terminate()
        wait_for(lambda: serve.poll() is not None, 10, "serve to stop on SIGTERM")
