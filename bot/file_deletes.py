"""Deleting a file version the thread no longer needs (a spilled report's or a chart's), and
remembering the ones Slack would not delete so the next sync tries again. Shared by spill.py
and chart_sync.py so both follow one rule."""

from __future__ import annotations

import logging

from redis.asyncio import Redis as AsyncRedis
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from jobs.connection import text

from .slack_client import take_slots

__all__ = ["GONE", "FileDeletes"]

log = logging.getLogger(__name__)

# Already gone: nothing left to delete, so nothing to retry.
GONE = frozenset({"file_not_found", "file_deleted"})


class FileDeletes:
    """`what` names the files in log lines ("report file", "chart file"); `ttl_seconds` is how
    long a failed delete is remembered (as long as the record of the files themselves)."""

    def __init__(self, redis: AsyncRedis, client: AsyncWebClient, what: str, ttl_seconds: int) -> None:
        self.redis = redis
        self.client = client
        self.what = what
        self.ttl_seconds = ttl_seconds

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
