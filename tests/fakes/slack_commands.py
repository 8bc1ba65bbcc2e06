"""Slash commands as Slack delivers them over Socket Mode: a `slash_commands` envelope whose
payload is the command's form fields, acked with `{"envelope_id", "payload": {...}}` when the
app answers in the ack (Bolt's `ack(text=...)`).

Slack delivers a command only to an app whose manifest declares it and whose bot has the
`commands` scope; otherwise the person sees "… is not a valid command" and the app gets
nothing. `send_slash_command` enforces the same (raises `CommandNotDelivered`).
"""
from __future__ import annotations

import secrets
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tests.fakes.scopes import MANIFEST
from tests.fakes.slack_records import APP_ID, TEAM_ID

if TYPE_CHECKING:
    from tests.fakes.slack import FakeSlack

COMMANDS_SCOPE = "commands"


class CommandNotDelivered(AssertionError):
    """Slack would not deliver this command to the app (undeclared, or the scope is missing)."""


def manifest_commands(path: Path = MANIFEST) -> set[str]:
    manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {c["command"] for c in (manifest.get("features") or {}).get("slash_commands") or []}


def slash_command_payload(command: str, text: str, *, user: str, channel: str, channel_name: str = "general",
                          team_id: str = TEAM_ID) -> dict[str, Any]:
    """The form fields Slack posts for a slash command (all strings), as Socket Mode carries them."""
    return {
        "token": "verification-token",
        "team_id": team_id,
        "team_domain": "deepthread-test",
        "channel_id": channel,
        "channel_name": "directmessage" if channel.startswith("D") else channel_name,
        "user_id": user,
        "user_name": user.lower(),
        "command": command,
        "text": text,
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": f"https://hooks.slack.com/commands/{team_id}/{secrets.randbelow(10**12)}/{secrets.token_hex(12)}",
        "trigger_id": f"{secrets.randbelow(10**12)}.{secrets.randbelow(10**12)}.{secrets.token_hex(16)}",
    }


def send_slash_command(fake: FakeSlack, text: str, *, command: str = "/deepthread", user: str = "U0ANA",
                       channel: str = "C0TEST", channel_name: str = "general") -> str:
    """Deliver `command text` over Socket Mode as Slack does; returns the envelope_id the app must ack."""
    declared = manifest_commands()
    if command not in declared:
        raise CommandNotDelivered(f"{command} is not declared in manifest.yml (declared: {sorted(declared)})")
    if COMMANDS_SCOPE not in fake.scopes:
        raise CommandNotDelivered(f"the bot lacks the `{COMMANDS_SCOPE}` scope: Slack delivers no slash command")
    envelope_id = str(uuid.uuid4())
    fake.send_socket_frame({
        "envelope_id": envelope_id,
        "payload": slash_command_payload(command, text, user=user, channel=channel, channel_name=channel_name),
        "type": "slash_commands",
        "accepts_response_payload": True,
    })
    return envelope_id


def command_response(fake: FakeSlack, envelope_id: str) -> dict[str, Any] | None:
    """What the app answered in its ack of that envelope (None: not acked yet, or acked empty)."""
    for frame in fake.socket_received:
        if frame.get("envelope_id") == envelope_id:
            payload = frame.get("payload")
            return payload if isinstance(payload, dict) and payload else None
    return None
