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


def _envelope(event: dict[str, Any], *, event_id: str | None, team_id: str, bot_user_id: str,
              enterprise_id: str | None = None, is_enterprise_install: bool = False) -> dict[str, Any]:
    """An org-wide install's authorization names the org and no team, as Slack sends it."""
    return {
        "token": "verification-token",
        "team_id": team_id,
        "enterprise_id": enterprise_id,
        "context_team_id": team_id,
        "context_enterprise_id": enterprise_id,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or _event_id(),
        "event_time": int(time.time()),
        "authorizations": [
            {"enterprise_id": enterprise_id, "team_id": None if is_enterprise_install else team_id,
             "user_id": bot_user_id, "is_bot": True, "is_enterprise_install": is_enterprise_install}
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-{secrets.token_hex(16)}",
    }


def app_uninstalled_event(*, team_id: str = TEAM_ID, bot_user_id: str = "UBOT", enterprise_id: str | None = None,
                          is_enterprise_install: bool = False) -> dict[str, Any]:
    """`app_uninstalled`: the workspace (or org) removed the app (its tokens are already revoked)."""
    return _envelope({"type": "app_uninstalled"}, event_id=None, team_id=team_id, bot_user_id=bot_user_id,
                     enterprise_id=enterprise_id, is_enterprise_install=is_enterprise_install)


def tokens_revoked_event(*, team_id: str = TEAM_ID, bot: list[str] | None = None, oauth: list[str] | None = None,
                         bot_user_id: str = "UBOT") -> dict[str, Any]:
    """`tokens_revoked`: the user ids whose user tokens (`oauth`) or bot tokens (`bot`) were revoked."""
    event = {"type": "tokens_revoked", "tokens": {"oauth": oauth or [], "bot": bot or []}}
    return _envelope(event, event_id=None, team_id=team_id, bot_user_id=bot_user_id)


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
    enterprise_id: str | None = None,
    is_enterprise_install: bool = False,
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
    return _envelope(event, event_id=event_id, team_id=team_id, bot_user_id=bot_user_id, enterprise_id=enterprise_id,
                     is_enterprise_install=is_enterprise_install)


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


def message_deleted_event(deleted_ts: str, *, channel: str = "C0TEST", thread_ts: str | None = None,
                          replies: bool = False, user: str = "U0ANA", team_id: str = TEAM_ID,
                          bot_user_id: str = "UBOT", previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """A message deleted, as Slack tells the channel's members: `message_deleted` with the
    `deleted_ts` and the message as it was (`previous_message`: `previous` when given, as the fake
    Slack held it, its author a bot's user and bot id for a bot's message); a thread's first message
    that has replies (`replies`) is not removed but replaced by a tombstone, sent as `message_changed`."""
    ts = new_ts()
    if previous is None:
        previous = {"type": "message", "user": user, "text": "", "ts": deleted_ts}
        if thread_ts:
            previous["thread_ts"] = thread_ts
    if replies:
        tombstone = {**previous, "subtype": "tombstone", "text": "This message was deleted.", "hidden": True,
                     "thread_ts": deleted_ts, "user": "USLACKBOT"}
        event: dict[str, Any] = {"type": "message", "subtype": "message_changed", "hidden": True, "channel": channel,
                                 "ts": ts, "event_ts": ts, "message": tombstone, "previous_message": previous}
    else:
        event = {"type": "message", "subtype": "message_deleted", "hidden": True, "channel": channel, "ts": ts,
                 "event_ts": ts, "deleted_ts": deleted_ts, "previous_message": previous}
    event["channel_type"] = "channel"
    return _envelope(event, event_id=None, team_id=team_id, bot_user_id=bot_user_id)


def channel_deleted_event(channel: str, *, private: bool = False, team_id: str = TEAM_ID,
                          bot_user_id: str = "UBOT") -> dict[str, Any]:
    """`channel_deleted` (`group_deleted` for a private channel): the channel is gone for everyone."""
    event = {"type": "group_deleted" if private else "channel_deleted", "channel": channel,
             "event_ts": new_ts()}
    return _envelope(event, event_id=None, team_id=team_id, bot_user_id=bot_user_id)


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


def agent_session_stopped_event(
    *,
    channel: str = "C0TEST",
    thread_ts: str,
    user: str = "U0ANA",
    streaming_message_ts: list[str] | None = None,
    event_id: str | None = None,
    bot_user_id: str = "UBOT",
    team_id: str = TEAM_ID,
) -> dict[str, Any]:
    """An `event_callback` envelope for agent_session_stopped: someone clicked a session's stop button."""
    event = {
        "type": "agent_session_stopped",
        "channel": channel,
        "thread_ts": thread_ts,
        "user": user,
        "event_ts": new_ts(),
        "streaming_message_ts": list(streaming_message_ts or []),
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


def form_body(fields: dict[str, str]) -> str:
    """A form-encoded body, as Slack posts slash commands and interactions over HTTP."""
    from urllib.parse import urlencode

    return urlencode(fields)


def slash_command_form(text: str, *, command: str = "/deepthread", user: str = "U0ANA", channel: str = "C0TEST",
                       team_id: str = TEAM_ID) -> str:
    """A slash command's HTTP body (application/x-www-form-urlencoded)."""
    from tests.fakes.slack_commands import slash_command_payload

    return form_body(slash_command_payload(command, text, user=user, channel=channel, team_id=team_id))


def block_action_form(action_id: str, *, user: str = "U0ANA", channel: str = "C0TEST", message_ts: str,
                      team_id: str = TEAM_ID) -> str:
    """A button press's HTTP body: `payload=` the block_actions JSON, form-encoded."""
    import json

    payload = {
        "type": "block_actions",
        "user": {"id": user, "team_id": team_id},
        "team": {"id": team_id, "domain": "deepthread-test"},
        "api_app_id": APP_ID,
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": False},
        "channel": {"id": channel},
        "message": {"ts": message_ts, "type": "message"},
        "trigger_id": f"{secrets.randbelow(10**12)}.{secrets.token_hex(8)}",
        "actions": [{"action_id": action_id, "block_id": "b1", "type": "button", "action_ts": new_ts()}],
    }
    return form_body({"payload": json.dumps(payload)})


FORM = "application/x-www-form-urlencoded"


def feedback_action_form(value: str, *, user: str, channel: str, message_ts: str, action_id: str = "report_feedback",
                         block_id: str = "report_feedback", team_id: str = TEAM_ID) -> str:
    """A press of 👍 or 👎 (`value`) of a feedback_buttons element: its block_actions HTTP body."""
    import json

    payload = {
        "type": "block_actions",
        "user": {"id": user, "team_id": team_id},
        "team": {"id": team_id, "domain": "deepthread-test"},
        "api_app_id": APP_ID,
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": False},
        "channel": {"id": channel},
        "message": {"ts": message_ts, "type": "message"},
        "trigger_id": f"{secrets.randbelow(10**12)}.{secrets.token_hex(8)}",
        "actions": [{"action_id": action_id, "block_id": block_id, "type": "feedback_buttons", "value": value,
                     "action_ts": new_ts()}],
    }
    return form_body({"payload": json.dumps(payload)})


def ephemeral_action_form(action: dict[str, Any], values: dict[str, dict[str, Any]], *, user: str, channel: str,
                          message_ts: str, response_url: str = "", team_id: str = TEAM_ID) -> str:
    """An action on an ephemeral message: Slack sends no `message`, marks the container ephemeral
    and sends the form's `state.values` (block id -> action id -> value) along."""
    import json

    payload = {
        "type": "block_actions",
        "user": {"id": user, "team_id": team_id},
        "team": {"id": team_id, "domain": "deepthread-test"},
        "api_app_id": APP_ID,
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": True},
        "channel": {"id": channel},
        "state": {"values": values},
        "response_url": response_url,
        "trigger_id": f"{secrets.randbelow(10**12)}.{secrets.token_hex(8)}",
        "actions": [{**action, "action_ts": new_ts()}],
    }
    return form_body({"payload": json.dumps(payload)})
