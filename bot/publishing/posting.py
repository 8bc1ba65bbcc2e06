"""Posting a run's messages exactly once, whichever serve replica posts them and however a post fails.

A post to Slack has no idempotency key: when its answer is lost (the replica killed right after
chat.postMessage, a connection reset, a timeout) it may or may not have landed, and posting again
blindly gives the thread a second progress message or a second report. So each of a run's messages

- is marked: it carries message metadata, event type MARKER_EVENT, payload {run_id, part};
- is recorded as intended just before it is sent, and its ts as soon as it is known
  (`deepthread:posts:{run}`: part -> "intended", then the ts);
- is recognised before any second attempt: a part intended but without a ts is looked up in the
  thread (conversations.replies with include_all_metadata) and the message found is adopted.

The SDK never resends a post by itself (bot/slack/retries.py); this module decides. All of it runs
under the run's posting lease (PostingLease), renewed while a post waits for its rate-limit slot,
and no post is sent once the lease is lost: another replica posts the run then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from functools import partial
from types import TracebackType
from typing import Any

from aiohttp import ClientError
from redis import Redis
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import keys
from bot.slack.client import take_slots
from jobs import AsyncRuns, Run
from jobs.keyspace.connection import text
from jobs.lifecycle.runs import POSTING_LEASE_SECONDS
from jobs.process.background import Stop, beside

__all__ = ["MARKER_EVENT", "PostingLease", "PostingLost", "RunPoster", "marker"]

log = logging.getLogger(__name__)

MARKER_EVENT = "deepthread_run_message"
INTENDED = "intended"
# A post whose outcome is unknown is looked for, then sent again, at most this often in all.
POST_ATTEMPTS = 3
# The record only matters until the run's messages are attached (seconds), or an orphan is posted.
POSTS_TTL_SECONDS = 7 * 24 * 3600
# Replies read per page when looking for a marker (conversations.replies allows up to 1,000).
LOOKUP_PAGE = 200
# Errors after which Slack may or may not have done the work.
OUTCOME_UNKNOWN: tuple[type[BaseException], ...] = (ClientError, TimeoutError, OSError)


class PostingLost(Exception):
    """This process no longer holds the run's posting lease: another one posts the run now."""


def marker(run_id: str, part: str) -> dict[str, Any]:
    """The metadata a run's message carries, so a later attempt can find it in the thread."""
    return {"event_type": MARKER_EVENT, "event_payload": {"run_id": run_id, "part": part}}


class PostingLease:
    """The run's posting lease for one process, kept while its posts are made (`async with`).
    `held` is False when it was not claimed, or once a renewal failed or came too late."""

    def __init__(self, runs: AsyncRuns, run_id: str, seconds: float = POSTING_LEASE_SECONDS) -> None:
        self.runs = runs
        self.run_id = run_id
        self.seconds = seconds
        self.owner = uuid.uuid4().hex
        self.held = False
        self._keeper: contextlib.AbstractAsyncContextManager[asyncio.Task[None]] | None = None

    async def __aenter__(self) -> PostingLease:
        self.held = await self.runs.claim_posting(self.run_id, self.seconds, self.owner)
        if self.held:
            # Renewed while the posts are made, stopped between renewals (jobs/process/background.py).
            self._keeper = beside(partial(self._keep, time.monotonic()), f"posting-{self.run_id}")
            await self._keeper.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._keeper is not None:
            await self._keeper.__aexit__(None, None, None)
        if self.held:
            await self.runs.release_posting(self.run_id, self.owner)

    async def posted(self) -> None:
        """The posts are made: stop renewing (waiting out a renewal under way), before the run is
        attached. `attach_messages` ends the lease in Redis, and a renewal after it would find the
        lease gone and take it for lost; what the holder does after attaching (the pin) needs none."""
        if self._keeper is not None:
            keeper, self._keeper = self._keeper, None
            await keeper.__aexit__(None, None, None)

    def check(self) -> None:
        """Raise PostingLost unless the lease is still this process's."""
        if not self.held:
            raise PostingLost(self.run_id)

    async def _keep(self, renewed_at: float, stop: Stop) -> None:
        while self.held and not await stop.pause(self.seconds / 3):
            sent = time.monotonic()
            left = renewed_at + self.seconds - sent
            try:
                kept = left > 0 and await asyncio.wait_for(
                    self.runs.renew_posting(self.run_id, self.owner, self.seconds), left
                )
            except TimeoutError:
                kept = False
            except Exception as exc:  # Redis away: try again while the lease may still be ours
                log.warning("run %s: renewing the posting lease failed (%s)", self.run_id, exc)
                continue
            if not kept:
                log.warning("run %s: lost the posting lease; another process posts the run", self.run_id)
                self.held = False
                return
            renewed_at = sent


class RunPoster:
    """Posts the parts of one run's messages in its thread, each exactly once (module docstring)."""

    def __init__(self, redis: Redis, client: AsyncWebClient, run: Run, lease: PostingLease | None = None) -> None:
        self.redis = redis
        self.client = client
        self.run = run
        self.lease = lease
        self.channel = run.channel or ""
        # Parts found where an earlier attempt posted them: they show what that attempt rendered.
        self.adopted: set[str] = set()

    async def post(self, part: str, **message: Any) -> str:
        """The ts of the run's `part` message: found where an earlier attempt left it, or posted now."""
        recorded = await asyncio.to_thread(self.redis.hget, keys.posts(self.run.id), part)
        if recorded is not None and text(recorded) != INTENDED:
            return text(recorded)
        if recorded is not None:
            found = await self.find(part)
            if found is not None:
                log.warning("run %s: its %s message was posted by an earlier attempt; adopting it", self.run.id, part)
                return await self._adopt(part, found)
        last: BaseException | None = None
        for _ in range(POST_ATTEMPTS):
            try:
                return await self._record(part, await self._send(part, message))
            except OUTCOME_UNKNOWN as exc:  # did Slack post it? look before trying again
                last = exc
                log.warning("run %s: posting its %s message: no answer (%s); looking for it", self.run.id, part, exc)
                found = await self.find(part)
                if found is not None:
                    return await self._adopt(part, found)
        assert last is not None
        raise last

    async def _send(self, part: str, message: dict[str, Any]) -> str:
        async def send() -> str:
            if self.lease is not None:
                self.lease.check()  # after the wait for a slot: the lease may have gone meanwhile
            await asyncio.to_thread(self._intend, part)
            answer = await self.client.chat_postMessage(
                channel=self.channel, thread_ts=self.run.thread_ts, metadata=marker(self.run.id, part), **message
            )
            return str(answer["ts"])

        return await take_slots(self.client, self.run.team, "chat.postMessage", send, channel=self.channel)

    def _intend(self, part: str) -> None:
        pipe = self.redis.pipeline()
        pipe.hset(keys.posts(self.run.id), part, INTENDED)
        pipe.expire(keys.posts(self.run.id), POSTS_TTL_SECONDS)
        pipe.execute()

    async def _adopt(self, part: str, ts: str) -> str:
        self.adopted.add(part)
        return await self._record(part, ts)

    async def _record(self, part: str, ts: str) -> str:
        await asyncio.to_thread(self.redis.hset, keys.posts(self.run.id), part, ts)
        return ts

    async def find(self, part: str) -> str | None:
        """The ts of this run's `part` message in its thread, if an earlier attempt posted it."""
        if not (self.channel and self.run.thread_ts):
            return None
        cursor: str | None = None
        while True:
            try:
                page = await self.client.conversations_replies(
                    channel=self.channel,
                    ts=self.run.thread_ts,
                    include_all_metadata=True,
                    limit=LOOKUP_PAGE,
                    cursor=cursor,
                )
            except SlackApiError as exc:
                if exc.response.get("error") == "thread_not_found":  # nothing in the thread yet
                    return None
                raise
            for message in page.get("messages") or []:
                meta = message.get("metadata") or {}
                payload = meta.get("event_payload") or {}
                if (
                    meta.get("event_type") == MARKER_EVENT
                    and payload.get("run_id") == self.run.id
                    and payload.get("part") == part
                ):
                    return str(message["ts"])
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return None
