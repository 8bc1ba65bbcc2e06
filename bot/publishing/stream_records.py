"""The publisher's own records of progress streams, in Redis: what each run's open stream has
shown, and which workspaces refused streaming.

`deepthread:stream:{run}` holds one JSON StreamRecord: the open stream's ts and when it
started, which task cards (by digest), text lines and plan title it shows. Only the process
holding the run's lease writes it (the mention flow writes the first one, before the run is
attached), so a restarted publisher reads where the stream stood and resumes or closes it.

`deepthread:stream-refused:{team}` marks a workspace whose Slack refused chat.startStream;
its runs show progress as an edited message until the mark lapses (the feature may be turned
on later). Setting it is also how exactly one process logs the refusal.
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, Field
from redis import Redis

from bot import keys
from jobs.connection import text

from .rendered import RENDERED_TTL_SECONDS

__all__ = [
    "REFUSAL_TTL_SECONDS",
    "StreamRecord",
    "StreamRecords",
]

log = logging.getLogger("bot.publisher.streams")

# A workspace that refused streaming is asked again after this long (an admin may turn it on).
REFUSAL_TTL_SECONDS = 24 * 3600


class StreamRecord(BaseModel):
    """Where a run's progress stream stands."""

    channel: str
    ts: str  # the open (or last) stream message
    opened_at: float  # epoch seconds: the stream is rolled over before Slack closes it
    number: int = 1  # 1 for the run's first stream, 2 after the first rollover, …
    after_step: int = 0  # steps up to this one were shown complete in an earlier stream
    title: str = ""  # digest of the plan title shown
    tasks: dict[str, str] = Field(default_factory=dict)  # card id -> digest, in this stream
    texts: list[str] = Field(default_factory=list)  # text lines shown (by key), in any stream of the run
    chars: int = 0  # text characters sent to this stream
    closed: bool = False  # the run's end state was shown and the stream stopped
    fallback: bool = False  # streaming was refused mid-run: progress continues as an edited message


class StreamRecords:
    """Synchronous Redis (callers run it off the event loop with asyncio.to_thread)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def get(self, run_id: str) -> StreamRecord | None:
        raw = self.redis.get(keys.stream(run_id))
        return StreamRecord.model_validate_json(text(raw)) if raw else None

    def put(self, run_id: str, record: StreamRecord) -> None:
        self.redis.set(keys.stream(run_id), record.model_dump_json(), ex=RENDERED_TTL_SECONDS)

    def refused(self, team: str | None) -> bool:
        return bool(self.redis.exists(keys.stream_refused(team)))

    def refuse(self, team: str | None, error: str) -> None:
        """Remember that this workspace refused streaming; the first to notice logs it."""
        if self.redis.set(keys.stream_refused(team), error, nx=True, ex=REFUSAL_TTL_SECONDS):
            log.warning(
                "workspace %s refused chat.startStream (%s): its runs show progress as an edited message",
                keys.workspace(team),
                error,
            )
