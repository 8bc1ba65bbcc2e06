"""Who can read a conversation now, asked of Slack and remembered briefly: the rule the team's library
keeps at read time (a report's audience is never copied into the library when it is shelved).

- A **public channel**'s report: anyone who is a person of this workspace (users.info: its team, or
  its Enterprise Grid org; not a guest account, `is_restricted` / `is_ultra_restricted`, who sees
  only the channels they are in), and anyone who is in that channel now (a Slack Connect channel's
  other organization included: they read the thread itself).
- A **private channel**'s, a **group DM**'s or a **DM**'s report: only the people in it now
  (`conversations.members`).
- Another workspace's report never (the library is per workspace, jobs/records/library.py).

Reusing a report in a new thread (a run's `earlier_research`) asks more: everyone who can read the
new thread must be able to read the report, so nothing of a private channel reaches a channel
whose people are not all in it, and nothing of the workspace reaches a Slack Connect channel's
other organization (docs/security.md, "Who may install, who is outside"). A public channel's
readers are the whole workspace, so a private report never goes into one.

What Slack does not answer in time counts as "cannot read" (fail closed). Answers are kept
`CACHE_SECONDS` per process, so a search listing thirty reports from five channels asks five times,
and someone removed from a channel loses its reports within that time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.exceptions import NotInstalled

from .audience import is_shared_externally

__all__ = ["CACHE_SECONDS", "Conversation", "Readers", "readers"]

log = logging.getLogger(__name__)

# How long an answer about a conversation or a person is trusted: brief, since membership changes.
CACHE_SECONDS = 60.0
# Each Slack lookup is given this long (a slash command must be answered within Slack's 3 s).
LOOKUP_SECONDS = 1.2
# Members read per page of conversations.members, and at most this many in all: a bigger
# conversation's membership is not known, so only what needs no list (a public report) reaches it.
MEMBERS_PAGE = 1000
MAX_MEMBERS = 5000
# People of a new thread looked up (users.info) to learn whether each is a person of this workspace;
# a thread with more readers to check than this reuses only its own channel's reports.
MAX_PEOPLE_CHECKED = 200
# Lookups in flight at once per check.
CONCURRENT_LOOKUPS = 8

T = TypeVar("T")


@dataclass(frozen=True)
class Conversation:
    """What Slack says about a conversation: its kind, whether another organization is in it, and its
    members (None when there were too many to list, or Slack did not say)."""

    id: str
    public: bool
    external: bool
    members: frozenset[str] | None


class _Cache:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._kept: dict[tuple[str, ...], tuple[float, Any]] = {}
        self._pending: dict[tuple[str, ...], asyncio.Future[Any]] = {}

    async def get(self, key: tuple[str, ...], ask: Callable[[], Awaitable[T]]) -> T:
        now = time.monotonic()
        kept = self._kept.get(key)
        if kept is not None and now - kept[0] < self.seconds:
            return kept[1]
        pending = self._pending.get(key)
        if pending is not None:  # the same question already asked: wait for its answer
            return await asyncio.shield(pending)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            value = await ask()
            self._kept[key] = (time.monotonic(), value)
            if len(self._kept) > 10_000:  # a long-lived serve: drop what is stale
                cutoff = time.monotonic() - self.seconds
                self._kept = {k: v for k, v in self._kept.items() if v[0] >= cutoff}
            future.set_result(value)
            return value
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a waiter gets it, nobody is warned of it
            raise
        finally:
            del self._pending[key]


class Readers:
    """Answers "can this person read that conversation's report" for one Slack client (one
    installation's token at a time, `team` and `enterprise` naming whose people count as members)."""

    def __init__(self, *, seconds: float = CACHE_SECONDS, lookup_seconds: float = LOOKUP_SECONDS) -> None:
        self._conversations = _Cache(seconds)
        self._people = _Cache(seconds)
        self.lookup_seconds = lookup_seconds

    async def _ask(self, call: Awaitable[Any]) -> Any:
        return await asyncio.wait_for(call, self.lookup_seconds)

    async def conversation(self, client: AsyncWebClient, team: str | None, channel: str) -> Conversation | None:
        """The conversation as Slack describes it now, or None when Slack does not say (fail closed)."""

        async def ask() -> Conversation | None:
            try:
                info = (await self._ask(client.conversations_info(channel=channel)))["channel"]
            except (SlackApiError, TimeoutError, KeyError, TypeError, NotInstalled) as exc:
                log.info("conversation %s: not described (%s); its reports are shown to nobody", channel, exc)
                return None
            public = bool(info.get("is_channel")) and not info.get("is_private") and not info.get("is_im")
            external = is_shared_externally(info, team)
            members = await self._members(client, channel)
            return Conversation(id=channel, public=public, external=external, members=members)

        return await self._conversations.get((team or "-", channel), ask)

    async def _members(self, client: AsyncWebClient, channel: str) -> frozenset[str] | None:
        members: list[str] = []
        cursor: str | None = None
        try:
            while True:
                page = await self._ask(client.conversations_members(channel=channel, limit=MEMBERS_PAGE, cursor=cursor))
                members += [str(m) for m in page.get("members") or []]
                cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                if not cursor:
                    return frozenset(members)
                if len(members) >= MAX_MEMBERS:
                    return None
        except (SlackApiError, TimeoutError, NotInstalled) as exc:
            log.info("conversation %s: members not listed (%s)", channel, exc)
            return None

    async def of_workspace(self, client: AsyncWebClient, team: str | None, enterprise: str | None, user: str) -> bool:
        """A person of this workspace (or its Enterprise org), not a guest account: reads every public channel."""

        async def ask() -> bool:
            try:
                info = (await self._ask(client.users_info(user=user)))["user"]
            except (SlackApiError, TimeoutError, KeyError, TypeError, NotInstalled):
                return False
            if info.get("deleted") or info.get("is_restricted") or info.get("is_ultra_restricted"):
                return False
            if info.get("is_stranger"):
                return False
            if team and info.get("team_id") == team:
                return True
            theirs = (info.get("enterprise_user") or {}).get("enterprise_id")
            return bool(enterprise and theirs == enterprise)

        return await self._people.get((team or "-", enterprise or "-", user), ask)

    async def can_read(
        self, client: AsyncWebClient, team: str | None, enterprise: str | None, user: str, channel: str
    ) -> bool:
        """Whether `user` can read a report kept from `channel`, now."""
        conversation = await self.conversation(client, team, channel)
        if conversation is None:
            return False
        if conversation.members is not None and user in conversation.members:
            return True
        return conversation.public and await self.of_workspace(client, team, enterprise, user)

    async def all_can_read(
        self,
        client: AsyncWebClient,
        team: str | None,
        enterprise: str | None,
        report_channel: str,
        thread_channel: str,
        *,
        bot_user: str | None = None,
    ) -> bool:
        """Whether everyone who can read `thread_channel` can read a report kept from `report_channel`."""
        if report_channel == thread_channel:
            return True
        report, thread = await asyncio.gather(
            self.conversation(client, team, report_channel), self.conversation(client, team, thread_channel)
        )
        if report is None or thread is None or thread.members is None:
            return False
        if thread.public and (not report.public or thread.external):
            return False  # the whole workspace, or another organization, reads the new thread
        if not report.public:
            return report.members is not None and thread.members - {bot_user or ""} <= report.members
        # A public report: every reader of the new thread must be a person of this workspace or in its channel.
        others = sorted(thread.members - (report.members or frozenset()) - {bot_user or ""})
        if len(others) > MAX_PEOPLE_CHECKED:
            return False
        gate = asyncio.Semaphore(CONCURRENT_LOOKUPS)

        async def member(person: str) -> bool:
            async with gate:
                return await self.of_workspace(client, team, enterprise, person)

        return all(await asyncio.gather(*(member(p) for p in others)))


_readers: Readers | None = None


def readers() -> Readers:
    """This process's readers: one cache for every listener and run it serves."""
    global _readers
    if _readers is None:
        _readers = Readers()
    return _readers
