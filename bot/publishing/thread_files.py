"""Files the publisher keeps in a thread (a spilled report, a chart): uploading a new version,
deleting the one it replaces, and remembering the deletes Slack refused so the next sync tries
again. Shared by spill.py and chart_sync.py so both follow one rule."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis as AsyncRedis
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.client import take_slots
from jobs.keyspace.connection import text

__all__ = ["GONE", "SETUP_ERRORS", "UPLOAD_METHODS", "ThreadFiles", "Upload", "adopt_legacy"]

log = logging.getLogger(__name__)

# Already gone: nothing left to delete, so nothing to retry.
GONE = frozenset({"file_not_found", "file_deleted"})
# files_upload_v2 makes these two calls; both wait for their rate-limit slots.
UPLOAD_METHODS = ("files.getUploadURLExternal", "files.completeUploadExternal")
# Slack errors a retry cannot fix until someone changes the app or the channel.
SETUP_ERRORS = frozenset(
    {
        "missing_scope",
        "not_allowed_token_type",
        "no_permission",
        "not_in_channel",
        "channel_not_found",
        "is_archived",
        "restricted_action",
        "file_uploads_disabled",
        "file_uploads_except_images_disabled",
        "not_allowed",
        "invalid_channel",
        "ekm_access_denied",
    }
)


async def adopt_legacy(redis: AsyncRedis, new: str, legacy: str) -> None:
    """A record of a report's files named before keys had a team, and its list of failed deletes,
    moved under the team the first time the report is synced (RENAMENX: a newer record wins).
    The record names one report message, so it belongs to the run being synced."""
    for suffix in ("", ":stale"):
        if not await redis.exists(new + suffix) and await redis.exists(legacy + suffix):
            await redis.renamenx(legacy + suffix, new + suffix)


@dataclass(frozen=True)
class Upload:
    """What an upload came to: a file (id, permalink), a setup error a retry cannot fix, or
    neither (a passing failure: try again on a later sync)."""

    file_id: str = ""
    permalink: str = ""
    setup_error: str = ""


class ThreadFiles:
    """`what` names the files in log lines ("full report", "chart file"); `ttl_seconds` is how
    long a failed delete is remembered (as long as the record of the files themselves)."""

    def __init__(self, redis: AsyncRedis, client: AsyncWebClient, what: str, ttl_seconds: int) -> None:
        self.redis = redis
        self.client = client
        self.what = what
        self.ttl_seconds = ttl_seconds

    async def upload(self, run_id: str, team: str | None, *, urgent: bool, **file: Any) -> Upload:
        """files_upload_v2 with `file` (channel, thread_ts, filename, content, title, …)."""
        client = self.client
        try:
            answer = await take_slots(
                client, team, UPLOAD_METHODS, lambda: client.files_upload_v2(**file), urgent=urgent
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error") or f"HTTP {exc.response.status_code}")
            if error in SETUP_ERRORS:
                log.warning(
                    "run %s: could not upload the %s in %s (%s): the app needs files:write and access to the channel",
                    run_id,
                    self.what,
                    file.get("channel"),
                    error,
                )
                return Upload(setup_error=error)
            log.warning("run %s: uploading the %s failed (%s); will retry", run_id, self.what, error)
            return Upload()
        except SlackClientError as exc:  # the upload step itself, or the connection
            log.warning("run %s: uploading the %s failed (%s); will retry", run_id, self.what, exc)
            return Upload()
        uploaded = answer.get("file") or (answer.get("files") or [{}])[0]
        return Upload(file_id=str(uploaded.get("id", "")), permalink=str(uploaded.get("permalink", "")))

    async def delete_or_remember(self, team: str | None, channel: str, stale_key: str, file_id: str) -> None:
        if not await self.delete(team, channel, file_id):
            await self.redis.sadd(stale_key, file_id)
            await self.redis.expire(stale_key, self.ttl_seconds)

    async def delete(self, team: str | None, channel: str, file_id: str) -> bool:
        client = self.client
        try:
            await take_slots(client, team, "files.delete", lambda: client.files_delete(file=file_id))
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error not in GONE:
                log.warning("could not delete the earlier %s %s in %s (%s)", self.what, file_id, channel, error)
                return False
        except SlackClientError as exc:
            log.warning("could not delete the earlier %s %s in %s (%s)", self.what, file_id, channel, exc)
            return False
        return True

    async def retry_remembered(self, team: str | None, channel: str, stale_key: str) -> None:
        for raw in await self.redis.smembers(stale_key):
            file_id = text(raw)
            if await self.delete(team, channel, file_id):
                await self.redis.srem(stale_key, file_id)
