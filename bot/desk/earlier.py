"""A run's `earlier_research` in Slack: the team's library, kept to the reports that everyone who can
read the run's thread may read (bot/slack/readers.py `all_can_read`), and the asker too.

Built per run by the worker's runtime (bot/cli/runtime.py), with the run's installation's token; the
engine sees only what passed (agent/earlier.py). The run's own thread is left out: its report is
already the run's to continue."""

from __future__ import annotations

import asyncio
import logging

from redis import Redis
from slack_sdk.web.async_client import AsyncWebClient

from agent import EarlierReport, EarlierSource
from bot.slack.readers import Readers
from jobs import Run
from jobs.records.library import CANDIDATES, Library, LibraryEntry

__all__ = ["SlackEarlierResearch"]

log = logging.getLogger(__name__)


def _report(entry: LibraryEntry) -> EarlierReport:
    return EarlierReport(
        run_id=entry.run_id,
        title=entry.title,
        date=entry.date,
        permalink=entry.permalink,
        summary=entry.summary,
        headings=entry.headings,
        sources=[EarlierSource(url=s.url, title=s.title) for s in entry.sources],
    )


class SlackEarlierResearch:
    """The library as one run's `earlier_research` sees it."""

    def __init__(self, redis: Redis, client: AsyncWebClient, run: Run, readers: Readers | None = None) -> None:
        self.library = Library(redis)
        self.client = client
        self.run = run
        self.readers = readers or Readers()

    async def _reusable(self, channel: str) -> bool:
        run = self.run
        thread = run.channel or ""
        everyone, asker = await asyncio.gather(
            self.readers.all_can_read(self.client, run.team, run.enterprise, channel, thread),
            self.readers.can_read(self.client, run.team, run.enterprise, run.requester or "", channel),
        )
        return everyone and asker

    async def search(self, query: str, *, limit: int) -> list[EarlierReport]:
        run = self.run
        ranked = await asyncio.to_thread(self.library.search, run.team, query, limit=CANDIDATES)
        ranked = [e for e in ranked if (e.channel, e.thread_ts) != (run.channel, run.thread_ts)]
        channels = list(dict.fromkeys(e.channel for e in ranked))
        allowed = dict(zip(channels, await asyncio.gather(*(self._reusable(c) for c in channels)), strict=True))
        kept = [e for e in ranked if allowed[e.channel]][:limit]
        if ranked:
            log.info(
                "run %s: %d earlier report(s) match, %d readable by everyone in its thread",
                run.id,
                len(ranked),
                len(kept),
            )
        return [_report(e) for e in kept]
