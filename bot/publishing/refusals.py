"""Workspaces that refused an optional Slack feature, remembered so no process asks again for a while.

One mechanism for every feature the bot can do without: the progress stream (chat.startStream),
the assistant thread status, agent sessions, the session stop event, canvases. A refusal marks the
workspace in Redis for REFUSAL_TTL_SECONDS (an admin may turn the feature on; then it is asked
again), and the `SET NX` that marks it decides which process logs it, so each refusal is logged
once, by whoever met it first, with what the workspace gets instead.

Sync and asyncio callers share the rule: `Refusals` takes a synchronous Redis (run it off the
event loop, as stream_records.py does), `AsyncRefusals` the publisher's asyncio one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from bot import keys

__all__ = [
    "CANVASES",
    "REFUSAL_TTL_SECONDS",
    "SESSIONS",
    "SESSION_STOP_EVENT",
    "STATUSES",
    "STREAMS",
    "AsyncRefusals",
    "Feature",
    "Refusals",
]

log = logging.getLogger("bot.publisher.refusals")

# A workspace that refused a feature is asked again after this long (an admin may turn it on).
REFUSAL_TTL_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Feature:
    """What was refused (as the log names it), where the mark lives, and what the workspace gets instead."""

    what: str
    key: Callable[[str | None], str]
    instead: str

    def line(self, team: str | None, error: str) -> str:
        return (
            f"workspace {keys.workspace(team)} refused {self.what} ({error}): {self.instead}; "
            f"asking again in {REFUSAL_TTL_SECONDS // 3600} h"
        )


STREAMS = Feature("chat.startStream", keys.stream_refused, "its runs show progress as an edited message")
STATUSES = Feature(
    "assistant thread statuses (assistant.threads.setStatus)", keys.status_off, "its threads show no status line"
)
SESSIONS = Feature(
    "agent sessions (agents.sessions.setStatus)",
    partial(keys.refused, "sessions"),
    "its runs show the assistant thread status instead and are stopped by reaction only",
)
SESSION_STOP_EVENT = Feature(
    "the session stop button (setStatus warned missing_agent_session_stopped_event_subscription)",
    partial(keys.refused, "session-stop-event"),
    "users see a loading indicator without a stop button: subscribe the app to agent_session_stopped "
    "(manifest.yml) and reinstall it; the stop reaction still works",
)
CANVASES = Feature(
    "canvases (canvases.create)",
    partial(keys.refused, "canvases"),
    "a report too long for one message is attached as a file instead",
)


class Refusals:
    """Synchronous Redis (callers run it off the event loop with asyncio.to_thread)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def refused(self, feature: Feature, team: str | None) -> str | None:
        """What the workspace answered when it refused `feature` (None: not refused, or the mark lapsed)."""
        raw = self.redis.get(feature.key(team))
        return raw.decode() if isinstance(raw, bytes) else raw

    def refuse(self, feature: Feature, team: str | None, error: str) -> bool:
        """Remember the refusal; True for the one caller that marked it first (and logged it)."""
        if self.redis.set(feature.key(team), error, nx=True, ex=REFUSAL_TTL_SECONDS):
            log.warning(feature.line(team, error))
            return True
        return False


class AsyncRefusals:
    """The same records, for the publisher's asyncio Redis."""

    def __init__(self, redis: AsyncRedis) -> None:
        self.redis = redis

    async def refused(self, feature: Feature, team: str | None) -> str | None:
        raw = await self.redis.get(feature.key(team))
        return raw.decode() if isinstance(raw, bytes) else raw

    async def refuse(self, feature: Feature, team: str | None, error: str) -> bool:
        if await self.redis.set(feature.key(team), error, nx=True, ex=REFUSAL_TTL_SECONDS):
            log.warning(feature.line(team, error))
            return True
        return False
