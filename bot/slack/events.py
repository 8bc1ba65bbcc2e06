"""The Slack events we accept, as pydantic models: anything else is ignored, never a crash."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr


def action_token_of(event: dict[str, Any]) -> SecretStr | None:
    """The Real-time Search action token a message or mention event carries: Slack documents it as
    "received in a message event" without naming the field's place; we read `action_token` on the
    event and, for assistant threads, under `assistant_thread` (docs/slack-app.md). A secret: wrapped
    at once so no log line or repr shows it."""
    raw = event.get("action_token")
    if not raw and isinstance(event.get("assistant_thread"), dict):
        raw = event["assistant_thread"].get("action_token")
    return SecretStr(raw) if isinstance(raw, str) and raw.strip() else None


_LEADING_MENTION = re.compile(r"^\s*(<@[A-Z0-9]+(?:\|[^>]*)?>[\s,:]*)+")


class MentionEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    user: str
    text: str = ""
    ts: str
    channel: str
    thread_ts: str | None = None
    bot_id: str | None = None
    subtype: str | None = None

    @property
    def thread(self) -> str:
        """The thread to answer in: the mention's thread, or a new one under the mention."""
        return self.thread_ts or self.ts


def question_of(text: str, bot_user_id: str | None) -> str:
    """The mention's text without the leading @bot mention(s)."""
    text = _LEADING_MENTION.sub("", text, count=1)
    if bot_user_id:
        text = text.replace(f"<@{bot_user_id}>", "")
    return text.strip()


class MessageEvent(BaseModel):
    """A human's message; only thread replies matter to us."""

    model_config = ConfigDict(extra="ignore")

    type: str
    user: str | None = None
    text: str = ""
    ts: str
    channel: str
    thread_ts: str | None = None
    bot_id: str | None = None
    subtype: str | None = None
    channel_type: str | None = None  # "im" for a direct message


class ReactionItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str = "message"
    channel: str
    ts: str


class ReactionEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    user: str
    reaction: str
    item: ReactionItem
