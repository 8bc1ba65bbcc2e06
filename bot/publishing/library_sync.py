"""A finished report joins the team's library once Slack shows it final: the publisher shelves it with
its permalink (`chat.getPermalink` of the pinned report message), so a later search or run links to
the message people read. Only the thread's newest run shelves (its report carries on the earlier
runs', which leave the shelf with it); shelving again the same version asks Slack nothing."""

from __future__ import annotations

import asyncio
import logging

from redis import Redis
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.exceptions import NotInstalled
from jobs import RunState, RunStore
from jobs.records.library import Library

__all__ = ["Shelf"]

log = logging.getLogger(__name__)


class Shelf:
    """Puts finished reports on the library's shelf (serve's publisher, under the run's sync lease)."""

    def __init__(self, redis: Redis, store: RunStore, client: AsyncWebClient) -> None:
        self.library = Library(redis)
        self.store = store
        self.client = client

    async def shelve(self, state: RunState) -> bool:
        """Shelve `state`'s report if it is the thread's latest and not shelved at this version; True when done."""
        run = state.run
        if not state.status.finished or not (run.channel and run.thread_ts and run.report_message):
            return False
        if await asyncio.to_thread(self.library.shelved_version, run.id) == state.version:
            return False
        thread = await asyncio.to_thread(self.store.thread_run_ids, run.team, run.channel, run.thread_ts)
        if thread and thread[-1] != run.id:
            return False  # a newer run of the thread carries the report now
        try:
            answer = await self.client.chat_getPermalink(channel=run.channel, message_ts=run.report_message)
            permalink = str(answer.get("permalink") or "")
        except (SlackApiError, NotInstalled) as exc:  # shelved without a link; a later sync may add it
            log.info("run %s: no permalink for its report (%s)", run.id, exc)
            permalink = ""
        return await asyncio.to_thread(self.library.shelve, state, permalink, replaces=thread)
