"""Requests *to* a Bolt app: signed Events API bodies (app_mention, message, reaction_added),
as Slack sends them over HTTP or wraps them in a Socket Mode envelope."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import secrets
import time
from typing import Any

from tests.fakes.slack_records import APP_ID, TEAM_ID, new_ts

_event_counter = itertools.count(1)


def sign(secret: str, body: bytes | str, timestamp: int | None = None) -> dict[str, str]:
    """Headers Slack sends with an Events API request: `v0=` HMAC-SHA256 of `v0:{ts}:{body}`."""
    raw = body.encode() if isinstance(body, str) else body
    ts = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"v0:{ts}:".encode() + raw, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/json",
    }


def _event_id() -> str:
    return f"Ev{next(_event_counter):04d}{secrets.token_hex(4).upper()}"


def _envelope(event: dict[str, Any], *, event_id: str | None, team_id: str, bot_user_id: str) -> dict[str, Any]:
    return {
        "token": "verification-token",
        "team_id": team_id,
        "context_team_id": team_id,
        "context_enterprise_id": None,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or _event_id(),
        "event_time": int(time.time()),
        "authorizations": [
            {"enterprise_id": None, "team_id": team_id, "user_id": bot_user_id, "is_bot": True,
             "is_enterprise_install": False}
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-{secrets.token_hex(16)}",
    }


def app_mention_event(
    text: str,
    *,
    channel: str = "C0TEST",
    user: str = "U0ANA",
    ts: str | None = None,
    thread_ts: str | None = None,
    event_id: str | None = None,
    bot_user_id: str = "UBOT",
    team_id: str = TEAM_ID,
    action_token: str | None = None,
) -> dict[str, Any]:
    """An `event_callback` envelope for an app_mention; text gets a leading `<@bot>` unless it has one.
    `action_token` (from slack_search.issue_action_token) is carried as Slack carries it for search."""
    ts = ts or new_ts()
    mention = f"<@{bot_user_id}>"
    full = text if mention in text else f"{mention} {text}"
    event: dict[str, Any] = {
        "type": "app_mention",
        "user": user,
        "text": full,
        "ts": ts,
        "team": team_id,
        "channel": channel,
        "event_ts": ts,
        "client_msg_id": secrets.token_hex(16),
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    if action_token:
        event["action_token"] = action_token
    return _envelope(event, event_id=event_id, team_id=team_id, bot_user_id=bot_user_id)


def message_event(
    text: str,
    *,
    channel: str = "C0TEST",
    user: str | None = "U0ANA",
    ts: str | None = None,
    thread_ts: str | None = None,
    subtype: str | None = None,
    bot_id: str | None = None,
    channel_type: str = "channel",
    event_id: str | None = None,
    bot_user_id: str = "UBOT",
    team_id: str = TEAM_ID,
    action_token: str | None = None,
) -> dict[str, Any]:
    """An `event_callback` envelope for a `message` event (a reply, a bot's message, a subtype…)."""
    ts = ts or new_ts()
    event: dict[str, Any] = {
        "type": "message",
        "text": text,
        "ts": ts,
        "team": team_id,
        "channel": channel,
        "event_ts": ts,
        "channel_type": channel_type,
    }
    if user is not None:
        event["user"] = user
    if subtype:
        event["subtype"] = subtype
    if bot_id:
        event["bot_id"] = bot_id
    elif user is not None and not subtype:
        event["client_msg_id"] = secrets.token_hex(16)
    if thread_ts:
        event["thread_ts"] = thread_ts
    if action_token:
        event["action_token"] = action_token
    return _envelope(event, event_id=event_id, team_id=team_id, bot_user_id=bot_user_id)


def reaction_added_event(
    reaction: str,
    *,
    user: str = "U0ANA",
    item_channel: str = "C0TEST",
    item_ts: str,
    item_user: str = "UBOT",
    event_id: str | None = None,
    bot_user_id: str = "UBOT",
    team_id: str = TEAM_ID,
) -> dict[str, Any]:
    """An `event_callback` envelope for reaction_added on a message."""
    event = {
        "type": "reaction_added",
        "user": user,
        "reaction": reaction,
        "item_user": item_user,
        "item": {"type": "message", "channel": item_channel, "ts": item_ts},
        "event_ts": new_ts(),
    }
    return _envelope(event, event_id=event_id, team_id=team_id, bot_user_id=bot_user_id)


def block_action(action_id: str, *, user: str, channel: str, message_ts: str, team_id: str = TEAM_ID) -> dict[str, Any]:
    """The `block_actions` payload Slack sends when `user` presses a button on a message."""
    return {
        "type": "block_actions",
        "user": {"id": user, "team_id": team_id},
        "api_app_id": APP_ID,
        "token": "verification-token",
        "team": {"id": team_id},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": False},
        "trigger_id": f"{secrets.randbelow(10**9)}.{secrets.token_hex(6)}",
        "channel": {"id": channel},
        "message": {"type": "message", "ts": message_ts},
        "actions": [{"action_id": action_id, "block_id": secrets.token_hex(3), "type": "button",
                     "action_ts": f"{time.time():.6f}"}],
    }
