"""A report too big for one Slack message: the full report as a Markdown file in the thread.

One file per pinned report message, so a continuation that edits the same report replaces
the same file. Its Slack file id, the digest of what it holds and when it was uploaded live
in Redis under `deepthread:spill:{channel}:{ts}`, so any publisher process (a restarted
one too) replaces the right file. A new version is uploaded before the old one is deleted:
the thread is never without the full report. A delete that fails is retried later.
While a run is active the file is replaced at most every REFRESH_SECONDS (each version is
a new file in the thread); the final version is uploaded as soon as the run ends.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from redis.asyncio import Redis as AsyncRedis
from slack_sdk.web.async_client import AsyncWebClient

from bot import keys
from jobs import RunState
from jobs.keyspace.connection import text

from .message_parts import Attachment
from .thread_files import ThreadFiles, adopt_legacy

log = logging.getLogger(__name__)

# While the run is active, the file is replaced at most this often (the message index is live).
REFRESH_SECONDS = 180.0
# After an error that only a change to the app's setup fixes, try again this much later.
SETUP_ERROR_RETRY_SECONDS = 600.0
# Remembered as long as run state is.
RECORD_TTL_SECONDS = 90 * 24 * 3600


@dataclass(frozen=True)
class SpillRecord:
    file_id: str = ""
    digest: str = ""
    uploaded_at: float = 0.0
    error: str = ""
    error_at: float = 0.0


@dataclass(frozen=True)
class SpillOutcome:
    ok: bool = True  # False: a retry later is worthwhile
    error: str | None = None  # a setup error the report should mention
    wake_at: float | None = None  # epoch seconds when a deferred upload is due


class SpillFiles:
    def __init__(self, redis: AsyncRedis, client: AsyncWebClient, *, refresh_seconds: float = REFRESH_SECONDS) -> None:
        self.redis = redis
        self.client = client
        self.files = ThreadFiles(redis, client, "full report", RECORD_TTL_SECONDS)
        self.refresh_seconds = refresh_seconds

    async def record(self, team: str | None, channel: str, report_ts: str) -> SpillRecord | None:
        key = keys.spill(team, channel, report_ts)
        await adopt_legacy(self.redis, key, keys.legacy_spill(channel, report_ts))
        raw = {text(k): text(v) for k, v in (await self.redis.hgetall(key)).items()}
        if not raw:
            return None
        return SpillRecord(
            file_id=raw.get("file_id", ""),
            digest=raw.get("digest", ""),
            uploaded_at=float(raw.get("uploaded_at") or 0),
            error=raw.get("error", ""),
            error_at=float(raw.get("error_at") or 0),
        )

    async def sync(self, state: RunState, attachment: Attachment | None, now: float) -> SpillOutcome:
        """Make the thread's file match `attachment` (None: the report fits, so no file)."""
        run = state.run
        if not run.channel or not run.report_message:
            return SpillOutcome()
        channel, ts = run.channel, run.report_message
        key = keys.spill(run.team, channel, ts)
        stale = keys.spill_stale(run.team, channel, ts)
        record = await self.record(run.team, channel, ts)
        await self.files.retry_remembered(run.team, channel, stale)
        if attachment is None:
            if record is not None:  # the report fits again: the file would only mislead
                if record.file_id:
                    await self.files.delete_or_remember(run.team, channel, stale, record.file_id)
                await self.redis.delete(key)
            return SpillOutcome()
        if record is not None and record.file_id and record.digest == attachment.digest():
            return SpillOutcome()
        if record is not None and record.error and now - record.error_at < SETUP_ERROR_RETRY_SECONDS:
            return SpillOutcome(error=record.error, wake_at=record.error_at + SETUP_ERROR_RETRY_SECONDS)
        if (
            record is not None
            and record.file_id
            and not state.status.finished
            and now - record.uploaded_at < self.refresh_seconds
        ):
            return SpillOutcome(wake_at=record.uploaded_at + self.refresh_seconds)

        upload = await self.files.upload(
            run.id,
            run.team,
            urgent=state.status.finished,
            channel=channel,
            thread_ts=run.thread_ts,
            filename=attachment.filename,
            content=attachment.content,
            title=attachment.title,
            initial_comment=attachment.comment,
        )
        if upload.setup_error:
            await self.redis.hset(key, mapping={"error": upload.setup_error, "error_at": now})
            await self.redis.expire(key, RECORD_TTL_SECONDS)
            return SpillOutcome(error=upload.setup_error, wake_at=now + SETUP_ERROR_RETRY_SECONDS)
        if not upload.file_id:
            return SpillOutcome(ok=False)
        file_id = upload.file_id
        await self.redis.hset(
            key,
            mapping={"file_id": file_id, "digest": attachment.digest(), "uploaded_at": now, "error": "", "error_at": 0},
        )
        await self.redis.expire(key, RECORD_TTL_SECONDS)
        if record is not None and record.file_id and record.file_id != file_id:
            await self.files.delete_or_remember(run.team, channel, stale, record.file_id)
        return SpillOutcome()
