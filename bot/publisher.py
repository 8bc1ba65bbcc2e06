"""Keeps each run's Slack messages in step with its run state.

All Slack writes for a run go through here: it follows the updates stream, coalesces
bursts, re-renders the whole state and calls chat.update only when the rendering changed.
It remembers how far it has read only once everything read was synced, and resumes
from there (plus every active run) on start, so a restart loses nothing.
"""
from __future__ import annotations

import asyncio
import logging
import time

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from jobs import RunNotFound, RunState, RunStore
from jobs.keys import PREFIX, UPDATES_STREAM

from .render import SlackMessage, render_progress, render_report

log = logging.getLogger(__name__)

# A run's messages are updated at most this often (final states are flushed regardless).
MIN_UPDATE_INTERVAL_SECONDS = 1.0
# How long one stream read waits for news before checking deferred runs.
READ_BLOCK_MS = 250
# Runs synced at once: bounded so one burst cannot exhaust Slack's rate limit by itself.
CONCURRENT_SYNCS = 4
# Slack errors after which a message can never be updated again.
PERMANENT_ERRORS = {"message_not_found", "cant_update_message", "edit_window_closed", "channel_not_found", "is_archived"}


CURSOR_KEY = f"{PREFIX}:publisher:cursor"  # last stream id whose runs are all in Slack


def rendered_key(run_id: str) -> str:
    return f"{PREFIX}:rendered:{run_id}"


def remember_rendered(redis: Redis, run_id: str, *, progress: str, report: str) -> None:
    redis.hset(rendered_key(run_id), mapping={"progress": progress, "report": report})
    redis.expire(rendered_key(run_id), 90 * 24 * 3600)


class Publisher:
    def __init__(self, redis: Redis, async_redis: AsyncRedis, store: RunStore, client: AsyncWebClient) -> None:
        self.redis = redis
        self.async_redis = async_redis
        self.store = store
        self.client = client
        self._pending: set[str] = set()
        self._last_sync: dict[str, float] = {}
        self._semaphore = asyncio.Semaphore(CONCURRENT_SYNCS)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Sync until `stop` is set. Stopping between reads, never by cancelling one: a
        cancelled blocking XREAD can leave redis-py's asyncio connection stuck."""
        stop = stop or asyncio.Event()
        cursor = await self.async_redis.get(CURSOR_KEY)
        last_id = cursor.decode() if cursor else "0-0"
        self._pending.update(await asyncio.to_thread(self.store.active_ids))  # re-render whatever was in flight
        while not stop.is_set():
            try:
                last_id = await self._read(last_id)
                await self._flush()
                if not self._pending:
                    await self.async_redis.set(CURSOR_KEY, last_id)
            except asyncio.CancelledError:
                raise
            except Exception:  # the publisher must outlive any single bad run or Redis blip
                log.exception("publisher cycle failed; continuing")
                await asyncio.sleep(1)

    async def _read(self, last_id: str) -> str:
        block = READ_BLOCK_MS if not self._pending else 50
        answer = await self.async_redis.xread({UPDATES_STREAM: last_id}, block=block, count=500)
        for _stream, entries in answer or []:
            for entry_id, fields in entries:
                last_id = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                run_id = fields.get(b"run_id") or fields.get("run_id")
                if run_id:
                    self._pending.add(run_id.decode() if isinstance(run_id, bytes) else run_id)
        return last_id

    async def _flush(self) -> None:
        now = time.monotonic()
        due = []
        for run_id in list(self._pending):
            try:
                # Store reads block; keep them off the loop that also acks Slack events.
                state = await asyncio.to_thread(self.store.get, run_id)
            except RunNotFound:
                self._pending.discard(run_id)
                continue
            recent = now - self._last_sync.get(run_id, 0.0) < MIN_UPDATE_INTERVAL_SECONDS
            if recent and not state.status.finished:
                continue  # coalesce: a later flush picks up everything that changed meanwhile
            self._pending.discard(run_id)
            due.append(state)
        await asyncio.gather(*(self._sync_guarded(state) for state in due))

    async def _sync_guarded(self, state: RunState) -> None:
        async with self._semaphore:
            self._last_sync[state.run.id] = time.monotonic()
            if not await self.sync(state):
                self._pending.add(state.run.id)  # retry on a later cycle
            if state.status.finished:
                self._last_sync.pop(state.run.id, None)

    async def sync(self, state: RunState) -> bool:
        """Bring both messages up to date; False when a retry later is worthwhile."""
        run = state.run
        if not run.channel:
            return True
        ok = True
        raw = await asyncio.to_thread(self.redis.hgetall, rendered_key(run.id))
        stored = {k.decode(): v.decode() for k, v in raw.items()}
        for name, ts, message in (
            ("progress", run.progress_message, render_progress(state)),
            ("report", run.report_message, render_report(state)),
        ):
            if not ts:
                continue
            digest = message.digest()
            if stored.get(name) == digest:
                continue
            if await self._update(run.channel, ts, message, run.id, name):
                await asyncio.to_thread(self.redis.hset, rendered_key(run.id), name, digest)
            else:
                ok = False
        return ok

    async def _update(self, channel: str, ts: str, message: SlackMessage, run_id: str, name: str) -> bool:
        try:
            await self.client.chat_update(channel=channel, ts=ts, text=message.text, blocks=message.blocks)
            return True
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error in PERMANENT_ERRORS:
                log.warning("run %s: %s message can no longer be updated (%s)", run_id, name, error)
                return True  # nothing a retry could fix; do not loop on it
            log.warning("run %s: updating the %s message failed (%s); will retry", run_id, name, error)
            return False
