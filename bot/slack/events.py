"""The Slack events we accept, as pydantic models: anything else is ignored, never a crash."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

# Problems named in a malformed event's log line; the rest are counted.
PROBLEMS_LOGGED = 3


def malformed(kind: str, exc: ValidationError, body: dict[str, Any]) -> str:
    """A log line for an event we refuse: its ids and what is wrong with which field, never the event
    itself (an event carries people's words and, for search, the requester's action token)."""
    problems = exc.errors(include_input=False, include_url=False, include_context=False)
    named = "; ".join(f"{'.'.join(map(str, p['loc'])) or 'event'}: {p['type']}" for p in problems[:PROBLEMS_LOGGED])
    more = f" (+{len(problems) - PROBLEMS_LOGGED} more)" if len(problems) > PROBLEMS_LOGGED else ""
    ids = ", ".join(
        f"{key} {logged_id(body.get(key))}" for key in ("event_id", "team_id", "api_app_id") if body.get(key)
    )
    return f"ignored a malformed {kind} ({ids or 'no ids'}): {named}{more}"


def logged_id(value: object) -> str:
    """An id as logged: a short word of letters, digits and dots, or a mark that it was not one."""
    text = str(value)
    return text if re.fullmatch(r"[A-Za-z0-9._-]{1,40}", text) else "(not an id)"


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


class SessionStoppedEvent(BaseModel):
    """agent_session_stopped: someone clicked the stop button of a thread's agent session. Slack has
    stopped the app's streams it lists (`streaming_message_ts`, empty when none was streaming)."""

    model_config = ConfigDict(extra="ignore")

    type: str
    channel: str
    thread_ts: str
    user: str
    event_ts: str | None = None
    streaming_message_ts: list[str] = Field(default_factory=list)


# A person's id as Slack writes it: what a Home tab is published for (views.publish names the viewer).
SLACK_USER_ID = r"^[UW][A-Z0-9]{2,40}$"
SLACK_USER_ID_PATTERN = re.compile(SLACK_USER_ID)  # for checks outside a model, compiled once


class HomeOpenedEvent(BaseModel):
    """app_home_opened: someone opened one of the app's tabs (`home` or `messages`)."""

    model_config = ConfigDict(extra="ignore")

    type: str
    user: str = Field(pattern=SLACK_USER_ID)
    tab: str = "home"
