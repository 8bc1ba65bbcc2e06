"""What the fake Slack stores and the limits it enforces: messages, pins, files, ts values.

Shared by the Web API methods (slack_web.py), Socket Mode (slack_socket.py), the event builders
(slack_events.py) and the server (slack.py)."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

# Slack's limits (see PLATFORM-NOTES.md); the fake enforces them so the bot's splitting is tested.
MAX_TEXT_CHARS = 40_000
MAX_BLOCKS = 50
MAX_SECTION_TEXT_CHARS = 3_000
MAX_SECTION_FIELD_CHARS = 2_000
MAX_HEADER_TEXT_CHARS = 150
MAX_MARKDOWN_TOTAL_CHARS = 12_000
# Undocumented cumulative limit on all text in a message's blocks.
MAX_BLOCKS_TOTAL_CHARS = 13_000
# Message metadata: event_type is a short snake_case name; the payload is a JSON object of a
# bounded size (Slack documents the shape, not the exact bound: this fake assumes 8 KB).
MAX_METADATA_EVENT_TYPE_CHARS = 255
MAX_METADATA_PAYLOAD_BYTES = 8_192


# Each method's rate tier, calls a minute per workspace, from its page (Tier 2: 20+, Tier 3: 50+,
# Tier 4: 100+); FakeSlack.enforce_tiers() answers 429 past them. chat.postMessage is Slack's
# "about one a second" per channel (not modelled per channel here).
TIERS: dict[str, int] = {
    "chat.update": 50, "chat.delete": 50, "chat.postEphemeral": 100, "pins.add": 20, "pins.remove": 20,
    "reactions.add": 50, "reactions.remove": 50, "files.delete": 50, "files.getUploadURLExternal": 100,
    "files.completeUploadExternal": 100, "files.info": 100, "conversations.replies": 50, "users.info": 100,
    "chat.startStream": 20, "chat.appendStream": 100, "chat.stopStream": 20,
    "agents.sessions.setStatus": 50, "agents.sessions.rename": 50,
    "canvases.create": 20, "canvases.edit": 50, "canvases.sections.lookup": 50, "canvases.access.set": 50,
}

TEAM_ID = "T0TEST"
TEAM_NAME = "Deepthread Test"
BOT_ID = "BBOT"
APP_ID = "A0TEST"
# First ts handed out; every message gets the next 100 µs step, so ts values sort like Slack's.
_TS_BASE_MICROS = 1_700_000_000_000_000
_TS_STEP_MICROS = 100
# One sequence for the fake's messages and the event builders, so a thread sorts parent first.
_ts_lock = threading.Lock()
_ts_counter = itertools.count(1)


def new_ts() -> str:
    """A fresh message ts, greater than every ts handed out before in this process."""
    with _ts_lock:
        micros = _TS_BASE_MICROS + next(_ts_counter) * _TS_STEP_MICROS
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


class SlackError(Exception):
    """Raised inside a method handler: becomes `{"ok": false, "error": code}` (HTTP 200)."""

    def __init__(self, code: str, **extra: Any) -> None:
        super().__init__(code)
        self.code = code
        self.extra = extra


@dataclass
class SlackMessage:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]] | None = None
    thread_ts: str | None = None
    user: str = ""
    bot_id: str | None = None
    edits: int = 0
    history: list[str] = field(default_factory=list)  # previous texts, oldest first
    files: list[str] = field(default_factory=list)  # file ids shared with the message
    reactions: dict[str, list[str]] = field(default_factory=dict)  # name -> users
    deleted: bool = False
    edited_ts: str | None = None
    # Message metadata ({"event_type": …, "event_payload": {…}}): returned by conversations.replies
    # and conversations.history only when the caller asks with include_all_metadata, as Slack does.
    metadata: dict[str, Any] | None = None
    team: str | None = None  # the workspace of its channel


@dataclass
class Ephemeral:
    channel: str
    user: str
    text: str
    blocks: list[dict[str, Any]] | None
    thread_ts: str | None
    message_ts: str


@dataclass
class Pin:
    channel: str
    ts: str
    created_by: str
    created: int


@dataclass
class UploadedFile:
    id: str
    filename: str
    length: int
    content: bytes | None = None
    title: str | None = None
    channel_id: str | None = None
    thread_ts: str | None = None
    initial_comment: str | None = None
    completed: bool = False
    deleted: bool = False
    team: str | None = None  # the workspace whose bot uploaded it


def _str(v: Any) -> str:
    return "" if v is None else str(v)


def _ts_key(ts: str) -> tuple[int, int]:
    sec, _, frac = ts.partition(".")
    return int(sec), int(frac or 0)


def _ok_false(error: str, **extra: Any) -> web.Response:
    return web.json_response({"ok": False, "error": error, **extra})
