"""Logs carry ids, never payloads (issue 45, item 5b), through a real `deepthread serve`.

An `app_mention` without a `user` was logged whole, its action token included. Generated over every
event the manifest subscribes to (and one it does not, which Bolt leaves unhandled), each sent whole
and in every malformed shape (a field missing, of the wrong type, null), each carrying an action
token, the envelope's verification token, a person's words and a bot token-shaped string, with the
log at DEBUG in text and JSON: none of them is ever in serve's log, and every line about a refused
event names it by its ids.
"""
from __future__ import annotations

import copy
import json
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


import pytest
import yaml

from tests.e2e.stack import post_event, serve_only, stack_environment
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_events import (
    agent_session_stopped_event,
    app_mention_event,
    app_uninstalled_event,
    channel_deleted_event,
    message_event,
    reaction_added_event,
    tokens_revoked_event,
)
from tests.paths import ROOT

ACTION_TOKEN = f"1700000000.424242.{secrets.token_hex(8)}"
VERIFICATION = f"verif{secrets.token_hex(8)}"
WORDS = f"private words {secrets.token_hex(6)}"
BOT_TOKEN_SHAPED = f"xoxb-{secrets.token_hex(10)}"
SECRETS = (ACTION_TOKEN, VERIFICATION, WORDS, BOT_TOKEN_SHAPED)

# Every event type the manifest subscribes to (message.channels and friends are `message`), with a
# builder of its envelope; an event no listener takes is added, for Bolt's "unhandled" path.
BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    "app_mention": lambda: app_mention_event(f"<@UBOT> {WORDS}"),
    "message": lambda: message_event(WORDS, thread_ts="1700000000.000001"),
    "reaction_added": lambda: reaction_added_event("octagonal_sign", item_ts="1700000000.000002"),
    "app_uninstalled": lambda: app_uninstalled_event(),
    "tokens_revoked": lambda: tokens_revoked_event(bot=["UBOT"]),
    "channel_deleted": lambda: channel_deleted_event("C0GONE"),
    "group_deleted": lambda: channel_deleted_event("G0GONE", private=True),
    "agent_session_stopped": lambda: agent_session_stopped_event(channel="C0TEST", thread_ts="1700000000.000001"),
    "app_home_opened": lambda: {**app_mention_event("x"), "event": {"type": "app_home_opened", "user": "U0ANA",
                                                                    "channel": "D0ANA", "tab": "home"}},
}
# Malformed shapes: each applied to the event's own fields.
MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "whole": lambda e: None,
    "without user": lambda e: e.pop("user", None),
    "user of the wrong type": lambda e: e.update(user={"id": WORDS}),
    "without channel": lambda e: e.pop("channel", None),
    "channel null": lambda e: e.update(channel=None),
    "text of the wrong type": lambda e: e.update(text=[WORDS]),
    "without ts": lambda e: e.pop("ts", None) or e.pop("event_ts", None),
    "item of the wrong type": lambda e: e.update(item=WORDS),
}


def test_every_event_type_s_log_lines_carry_ids_never_payloads() -> None:
    manifest = yaml.safe_load((ROOT / "manifest.yml").read_text(encoding="utf-8"))
    subscribed = {e.split(".")[0] for e in manifest["settings"]["event_subscriptions"]["bot_events"]}
    assert subscribed <= set(BUILDERS), f"an event type the manifest subscribes to has no case: {subscribed - set(BUILDERS)}"


def _envelopes() -> list[dict[str, Any]]:
    out = []
    for kind, build in sorted(BUILDERS.items()):
        for mutation, mutate in MUTATIONS.items():
            envelope = build()
            envelope["token"] = VERIFICATION
            event = envelope["event"]
            event["action_token"] = ACTION_TOKEN
            event["blocks"] = [{"type": "rich_text", "elements": [{"type": "text", "text": BOT_TOKEN_SHAPED}]}]
            mutate(event)
            envelope["event_id"] = f"Ev{kind[:6]}{mutation[:4]}{secrets.token_hex(3)}".replace(" ", "")
            out.append(copy.deepcopy(envelope))
    return out


def settled(log: Path, quiet: float = 1.5, limit: float = 20) -> None:
    """Once the handlers are done: the log has not grown for `quiet` seconds."""
    size, still, deadline = -1, time.monotonic(), time.monotonic() + limit
    while time.monotonic() < deadline:
        now = log.stat().st_size
        if now != size:
            size, still = now, time.monotonic()
        elif time.monotonic() - still >= quiet:
            return
        time.sleep(0.1)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_no_event_s_token_or_words_reach_the_log(tmp_path: Path, redis_url: str, fake_slack: FakeSlack,
                                                 fake_model, fake_web, log_format: str) -> None:
    env = stack_environment(redis_url, fake_slack, fake_model, fake_web)
    env.update(DEEPTHREAD_LOG_LEVEL="DEBUG", DEEPTHREAD_LOG_FORMAT=log_format)
    log = tmp_path / "serve.log"
    envelopes = _envelopes()
    with serve_only(env, log) as (_serve, stack):
        for envelope in envelopes:
            assert post_event(stack, envelope).status_code in (200, 400, 404), envelope["event"]
        settled(log)
    text = log.read_text()
    leaked = [(s, line) for line in text.splitlines() for s in SECRETS if s in line]
    assert not leaked, f"a payload reached the log: {leaked[:5]}"
    refused = [line for line in text.splitlines() if "malformed" in line or "nhandled" in line]
    assert refused, "the refused events were logged"
    for line in refused:
        words = json.loads(line)["message"] if log_format == "json" else line
        assert "Ev" in words or "event" in words, f"a refused event is named by its ids: {line}"
