"""The publisher's own records of progress streams, in Redis: what each run's open stream has
shown, and which workspaces refused streaming.

`deepthread:stream:{run}` holds one JSON StreamRecord: the open stream's ts and when it
started, which task cards (by digest), text lines and plan title it shows. Only the process
holding the run's lease writes it (the mention flow writes the first one, before the run is
attached), so a restarted publisher reads where the stream stood and resumes or closes it.

`deepthread:stream-refused:{team}` marks a workspace whose Slack refused chat.startStream;
its runs show progress as an edited message until the mark lapses (the feature may be turned
on later). The mark is the one refusal mechanism every optional feature shares (refusals.py):
setting it is also how exactly one process logs the refusal.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from redis import Redis

from bot import keys
from jobs.keyspace.connection import text

from .refusals import REFUSAL_TTL_SECONDS, STREAMS, Refusals
from .rendered import RENDERED_TTL_SECONDS

__all__ = [
    "REFUSAL_TTL_SECONDS",
    "StreamRecord",
    "StreamRecords",
]


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
    end_shown: bool = False  # the run's end state was appended (Tier 4); the stop (Tier 2) may follow later
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
        return Refusals(self.redis).refused(STREAMS, team) is not None

    def refuse(self, team: str | None, error: str) -> None:
        """Remember that this workspace refused streaming; the first to notice logs it."""
        Refusals(self.redis).refuse(STREAMS, team, error)
