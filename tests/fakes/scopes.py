"""Slack's side of OAuth scopes: which bot scope each Web API method needs.

From each method's page in Slack's API reference ("Required scopes", bot tokens). Where a
method accepts one of several scopes, any one suffices; conversation methods need the
scope for the kind of conversation, told by the id's first letter (C public, G private,
D direct message). `assistant.threads.setStatus` accepts `chat:write` since March 2026.
Methods that need no scope map to an empty tuple. A method missing from this table is a
method the fake has not been taught: the scope test says so instead of guessing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MANIFEST = Path(__file__).resolve().parents[2] / "manifest.yml"

METHOD_SCOPES: dict[str, tuple[str, ...]] = {
    "auth.test": (),
    "oauth.v2.access": (),  # the app's client credentials, no token
    "chat.postMessage": ("chat:write",),
    "chat.update": ("chat:write",),
    "chat.delete": ("chat:write",),
    "chat.postEphemeral": ("chat:write",),
    "chat.getPermalink": (),
    "chat.startStream": ("chat:write",),
    "chat.appendStream": ("chat:write",),
    "chat.stopStream": ("chat:write",),
    "pins.add": ("pins:write",),
    "pins.remove": ("pins:write",),
    "pins.list": ("pins:read",),
    "reactions.add": ("reactions:write",),
    "reactions.remove": ("reactions:write",),
    "users.info": ("users:read",),
    "assistant.threads.setStatus": ("chat:write", "assistant:write"),
    # Agent sessions: "chat:write is required to manage thread-based sessions" (the Agent sessions guide).
    "agents.sessions.setStatus": ("chat:write",),
    "agents.sessions.rename": ("chat:write",),
    "canvases.create": ("canvases:write",),
    "canvases.edit": ("canvases:write",),
    "canvases.access.set": ("canvases:write",),
    "canvases.sections.lookup": ("canvases:read",),
    "files.getUploadURLExternal": ("files:write",),
    "files.completeUploadExternal": ("files:write",),
    "files.delete": ("files:write",),
    "files.info": ("files:read",),
    "conversations.replies": ("<history>",),
    # Real-time Search: any one of the search scopes; which kinds of conversation it reaches is
    # decided per channel type by the fake (tests/fakes/slack_search.py).
    "assistant.search.context": ("search:read.public", "search:read.private", "search:read.mpim",
                                 "search:read.im", "search:read.files"),
    "conversations.history": ("<history>",),
    "conversations.info": ("<read>",),
    "conversations.members": ("<read>",),
    "views.publish": (),  # the Home tab: the bot token alone
}
# Called with the app-level token (xapp-…), whose scope is set on the app, not in the bot list.
APP_LEVEL_SCOPES = {"apps.connections.open": "connections:write"}
# conversations.* scope by the conversation id's first letter.
HISTORY_SCOPES = {"C": "channels:history", "G": "groups:history", "D": "im:history"}
# conversations.info / conversations.members: the read scope of the conversation's kind.
READ_SCOPES = {"C": "channels:read", "G": "groups:read", "D": "im:read"}
# Methods the SDK calls on our behalf, keyed by the SDK call that makes them.
SDK_COMPOSITES = {"files.upload.v2": ("files.getUploadURLExternal", "files.completeUploadExternal")}


def manifest_bot_scopes(path: Path = MANIFEST) -> set[str]:
    manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
    return set(manifest["oauth_config"]["scopes"]["bot"])


def needed(method: str, params: dict[str, Any]) -> tuple[str, ...]:
    """The scopes of which one is needed for this call (empty: none)."""
    scopes = METHOD_SCOPES.get(method, ())
    if scopes == ("<history>",):
        channel = str(params.get("channel", ""))
        return (HISTORY_SCOPES.get(channel[:1], "channels:history"),)
    if scopes == ("<read>",):
        channel = str(params.get("channel", ""))
        return (READ_SCOPES.get(channel[:1], "channels:read"),)
    return scopes
