"""The fake Slack's agent sessions: agents.sessions.setStatus, agents.sessions.rename, and the
stop button that sends agent_session_stopped.

Argument rules and error codes from the methods' pages (docs.slack.dev/reference/methods/
agents.sessions.setStatus and …rename, Tier 3 both, `chat:write`) and the event's page
(docs.slack.dev/reference/events/agent_session_stopped):

- `status` is one of active, processing, suspended, closed (else `invalid_status`); `thread_ts`
  is required for a thread session (`thread_ts_required`); `channel_id` is required for public
  channels (`channel_not_found` without it); `title` (at most 200 characters) and
  `initiator_user_id` are used only when the session is created; setStatus creates the session.
- Only an app declared as an agent can create sessions: this workspace has them when
  manifest.yml declares `features.agent_view` (`refuse_sessions()` turns them off; Slack then
  answers `feature_disabled`, "the agent tasks feature is not enabled for this workspace").
- Without the `agent_session_stopped` event subscription (manifest.yml's bot_events), setStatus
  succeeds with the warning `missing_agent_session_stopped_event_subscription`, and no stop
  button is shown (`press_stop` refuses to press one).
- The status never changes by itself; `press_stop` is a person clicking stop while the session
  is `processing`: Slack stops the app's streams in that thread and sends the event, whose
  `streaming_message_ts` lists them (empty when none was streaming).

ASSUMED (the pages do not say): a title over 200 characters answers `invalid_arguments`; an
append to a stream Slack stopped for the stop button answers `stopped_by_user`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from tests.fakes import scopes, slack_streaming
from tests.fakes.slack_events import agent_session_stopped_event
from tests.fakes.slack_records import SlackError, _str

if TYPE_CHECKING:
    from tests.fakes.slack import FakeSlack

__all__ = ["STATUSES", "Session", "press_stop", "refuse_sessions", "register", "session_of"]

STATUSES = frozenset({"active", "processing", "suspended", "closed"})
MAX_TITLE_CHARS = 200
WARNING = "missing_agent_session_stopped_event_subscription"


@dataclass
class Session:
    """One thread's agent session as Slack keeps it."""

    channel: str
    thread_ts: str
    title: str
    initiator_user_id: str | None
    created_at: float
    statuses: list[str] = field(default_factory=list)  # every status set, in order (the last is shown)

    @property
    def status(self) -> str:
        return self.statuses[-1]


def _manifest() -> dict[str, Any]:
    return yaml.safe_load(scopes.MANIFEST.read_text(encoding="utf-8"))


def register(fake: FakeSlack) -> None:
    """Teach `fake` the two session methods (idempotent). Sessions exist when the manifest declares the agent."""
    if getattr(fake, "sessions", None) is not None:
        return
    manifest = _manifest()
    fake.sessions = {}  # type: ignore[attr-defined]  # (channel, thread_ts) -> Session
    fake.sessions_enabled = "agent_view" in (manifest.get("features") or {})  # type: ignore[attr-defined]
    events = ((manifest.get("settings") or {}).get("event_subscriptions") or {}).get("bot_events") or []
    fake.session_stop_subscribed = "agent_session_stopped" in events  # type: ignore[attr-defined]
    fake._methods.update(
        {
            "agents.sessions.setStatus": lambda p: _set_status(fake, p),
            "agents.sessions.rename": lambda p: _rename(fake, p),
        }
    )


def refuse_sessions(fake: FakeSlack, refused: bool = True) -> None:
    """This workspace (or app) has no agent sessions: setStatus and rename answer feature_disabled."""
    register(fake)
    fake.sessions_enabled = not refused  # type: ignore[attr-defined]


def session_of(fake: FakeSlack, channel: str, thread_ts: str) -> Session | None:
    with fake._lock:
        return fake.sessions.get((channel, thread_ts))  # type: ignore[attr-defined]


def _where(fake: FakeSlack, p: dict[str, Any]) -> tuple[str, str]:
    if not fake.sessions_enabled:  # type: ignore[attr-defined]
        raise SlackError("feature_disabled")
    channel, thread_ts = _str(p.get("channel_id")), _str(p.get("thread_ts"))
    if not channel:
        raise SlackError("channel_not_found")  # required for public channels; we only serve channels
    if not thread_ts:
        raise SlackError("thread_ts_required")
    return channel, thread_ts


def _set_status(fake: FakeSlack, p: dict[str, Any]) -> dict[str, Any]:
    status = _str(p.get("status"))
    if status not in STATUSES:
        raise SlackError("invalid_status")
    channel, thread_ts = _where(fake, p)
    sessions: dict[tuple[str, str], Session] = fake.sessions  # type: ignore[attr-defined]
    session = sessions.get((channel, thread_ts))
    if session is None:
        title = _str(p.get("title"))
        if len(title) > MAX_TITLE_CHARS:
            raise SlackError("invalid_arguments")
        initiator = _str(p.get("initiator_user_id")) or None
        if initiator is not None and not initiator.startswith(("U", "W")):
            raise SlackError("user_not_found")
        session = Session(channel, thread_ts, title, initiator, time.monotonic())
        sessions[(channel, thread_ts)] = session
    session.statuses.append(status)
    answer: dict[str, Any] = {"status": status, "title": session.title}
    if not fake.session_stop_subscribed:  # type: ignore[attr-defined]
        answer["warning"] = WARNING
    return answer


def _rename(fake: FakeSlack, p: dict[str, Any]) -> dict[str, Any]:
    channel, thread_ts = _where(fake, p)
    title = _str(p.get("title"))
    if not 1 <= len(title) <= MAX_TITLE_CHARS:
        raise SlackError("invalid_name")
    session = fake.sessions.get((channel, thread_ts))  # type: ignore[attr-defined]
    if session is None:
        raise SlackError("session_not_found")
    session.title = title
    return {"title": title}


def press_stop(fake: FakeSlack, channel: str, thread_ts: str, user: str) -> dict[str, Any]:
    """A person clicks the session's stop button: the app's live streams in the thread stop, and
    the event Slack sends is returned (post it to the app)."""
    register(fake)
    with fake._lock:
        session = fake.sessions.get((channel, thread_ts))  # type: ignore[attr-defined]
        assert session is not None and session.status == "processing", "no stop button: the session is not processing"
        assert fake.session_stop_subscribed, "no stop button: the app is not subscribed to agent_session_stopped"  # type: ignore[attr-defined]
        stopped = []
        for stream in slack_streaming.streams_in(fake, channel, thread_ts):
            if stream.streaming:
                stream.streaming, stream.stopped_by_user = False, True
                stopped.append(stream.ts)
    return agent_session_stopped_event(channel=channel, thread_ts=thread_ts, user=user, streaming_message_ts=stopped,
                                       team_id=fake.team_id, bot_user_id=fake.bot_user_id)
