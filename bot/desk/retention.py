"""The bot's key families (bot/keys.py) under the retention rules of jobs/upkeep/retention.py, and the
deletions the bot asks for: a deleted question or report, a deleted channel, an uninstall, an
admin's `forget this thread`, `deepthread forget`, and the maintenance round."""

from __future__ import annotations

import asyncio
import logging
import re

from redis import Redis
from slack_sdk.web.async_client import AsyncWebClient

from bot import keys
from bot.desk.admins import is_admin
from bot.publishing.agent_sessions import idle_member
from bot.services import Services
from bot.slack.replies import reply, reply_privately
from jobs import RunState
from jobs.exceptions import RunNotFound
from jobs.upkeep.key_audit import JOBS_EXPIRING, MAX_KEYS, KeyAudit, audit_keys
from jobs.upkeep.retention import JOBS_CATALOGUE, Catalogue, Entry, Forgotten, Owner, Retention, Rule

__all__ = [
    "BOT_CATALOGUE",
    "BOT_EXPIRING",
    "FORGET",
    "forget_channel",
    "forget_deleted_message",
    "forget_thread_command",
    "forget_workspace",
    "key_audit",
    "retention",
]

log = logging.getLogger(__name__)

_RUN = Rule(Owner.RUN)
_MESSAGE = Rule(Owner.MESSAGE)
_THREAD = Rule(Owner.THREAD)
_WORKSPACE = Rule(Owner.WORKSPACE)

BOT_RULES: dict[str, Rule] = {
    "PUBLISHER_CURSOR": Rule(Owner.DEPLOYMENT),  # a stream id
    "INSTALLATIONS": Rule(Owner.INSTALLATION),  # the installation store removes its entry with the record
    "IDLE_SESSIONS": Rule(
        Owner.DEPLOYMENT, Entry("zrem", Owner.THREAD, lambda s: idle_member(s.team, s.channel, s.thread_ts))
    ),
    "installation": Rule(Owner.INSTALLATION),
    "OAUTH_STATES": Rule(Owner.MARK),  # five minutes after the last install flow began
    # A run's.
    "last_sync": _RUN,
    "posts": _RUN,
    "rendered": _RUN,
    "status_lease": _RUN,
    "stream": _RUN,
    "sync_lease": _RUN,
    # A run's messages (the report's files and canvas are named by its report message).
    "canvas": _MESSAGE,
    "charts": _MESSAGE,
    "charts_stale": _MESSAGE,
    "legacy_charts": _MESSAGE,
    "spill": _MESSAGE,
    "spill_stale": _MESSAGE,
    "legacy_spill": _MESSAGE,
    # A thread's.
    "session": _THREAD,
    "session_lease": _THREAD,
    "thread_log": _THREAD,
    "told_files": _THREAD,
    # A workspace's.
    "plan_first": _WORKSPACE,
    "ratelimit_pause": _WORKSPACE,
    "ratelimit_window": _WORKSPACE,
    "refused": _WORKSPACE,
    "status_off": _WORKSPACE,
    "stream_refused": _WORKSPACE,
}

BOT_CATALOGUE = Catalogue(
    module=keys,
    rules=BOT_RULES,
    shared=lambda: [name for name in keys.__all__ if name.isupper()],
    not_keys=frozenset({"DEFAULT_WORKSPACE", "workspace"}),
)


# The bot's families written with a TTL on every write (leases, refusals asked again in a day, rate
# counters), whatever their owner: the key audit reports one without a TTL (jobs/upkeep/key_audit.py).
BOT_EXPIRING = frozenset(
    {
        "session_lease",
        "status_lease",
        "sync_lease",
        "last_sync",
        "refused",
        "stream_refused",
        "ratelimit_window",
        "ratelimit_pause",
        "thread_log",
    }
)


def retention(redis: Redis) -> Retention:
    """Retention over every key the deployment writes: run state's and the bot's own."""
    return Retention(redis, (JOBS_CATALOGUE, BOT_CATALOGUE))


def key_audit(redis: Redis, *, limit: int = MAX_KEYS) -> KeyAudit:
    """The key audit (`doctor --live`) over every key the deployment writes: run state's and the
    bot's own, under the prefix set by jobs.keys.configure. Blocking."""
    return audit_keys(
        redis,
        (JOBS_CATALOGUE, BOT_CATALOGUE),
        expiring=JOBS_EXPIRING | BOT_EXPIRING,
        limit=limit,
    )


# --- what the bot asks for -------------------------------------------------------------------

# `forget this thread` (a reply in one of our threads, or mentioning us there): an admin's only.
FORGET = re.compile(r"^\s*(?:<@\w+>\s*)?(?:please\s+)?forget\s+this\s+thread[\s.!]*$", re.IGNORECASE)
FORGET_REFUSED = (
    "Only a workspace admin can delete this thread's stored data. The messages in Slack stay yours to delete; "
    "deleting the question deletes the thread's data too."
)
SLACK_STAYS = "The messages in Slack stay: delete them there if they should go too."


async def forget_thread_command(
    services: Services, client: AsyncWebClient, latest: RunState, user: str, channel: str, thread_ts: str
) -> None:
    """`forget this thread`: an admin's deletes every record of the thread (its runs stopped first)
    and says what went; anyone else is told, privately, who may."""
    run = latest.run
    if not await is_admin(services, client, user, team=run.team, enterprise=run.enterprise):
        await reply_privately(client, channel, user, FORGET_REFUSED)
        return
    gone = await asyncio.to_thread(
        lambda: retention(services.redis).forget_thread(run.team, channel, thread_ts, "forget")
    )
    log.warning("thread %s:%s of %s forgotten by %s: %d run(s)", channel, thread_ts, run.team, user, len(gone.runs))
    await reply(client, channel, thread_ts, f"{gone.summary()} {SLACK_STAYS}")


def _thread_of_deleted(
    services: Services, team: str | None, channel: str, deleted_ts: str, in_thread: str | None
) -> str | None:
    """The thread whose question (its first message), report, or a run's question or follow-up
    asked in it (a reply in the thread, `in_thread`) `deleted_ts` was, if it is ours."""
    if services.store.thread_run_ids(team, channel, deleted_ts):
        return deleted_ts
    state = services.runs.sync.run_of_message(team, channel, deleted_ts)
    if state is not None and state.run.report_message == deleted_ts and state.run.channel == channel:
        return state.run.thread_ts
    if in_thread and in_thread != deleted_ts:
        # Every later run of the thread carries a question's words (its memory, its openings): the
        # thread goes, as with its first question. A question of an older design has no ts: kept.
        for run_id in services.store.thread_run_ids(team, channel, in_thread):
            try:
                if services.store.get(run_id).run.question_ts == deleted_ts:
                    return in_thread
            except RunNotFound:
                continue  # expired meanwhile
    return None


async def forget_deleted_message(
    services: Services, team: str | None, channel: str, deleted_ts: str, *, in_thread: str | None = None
) -> Forgotten | None:
    """A question, follow-up or report deleted in Slack: its thread's records go too (its runs stopped first)."""

    def forget() -> Forgotten | None:
        thread_ts = _thread_of_deleted(services, team, channel, deleted_ts, in_thread)
        if thread_ts is None:
            return None
        return retention(services.redis).forget_thread(team, channel, thread_ts, "message_deleted")

    gone = await asyncio.to_thread(forget)
    if gone is not None:
        log.warning(
            "%s: message %s deleted in %s; deleted its thread's %d run(s)", team, deleted_ts, channel, len(gone.runs)
        )
    return gone


async def forget_channel(services: Services, team: str | None, channel: str) -> Forgotten:
    """The channel deleted in Slack: every thread of it, and its other records."""
    gone = await asyncio.to_thread(lambda: retention(services.redis).forget_channel(team, channel, "channel_deleted"))
    log.warning(
        "%s: channel %s deleted; deleted its %d thread(s), %d run(s)", team, channel, gone.threads, len(gone.runs)
    )
    return gone


async def forget_workspace(services: Services, team: str | None, *, enterprise: str | None = None) -> Forgotten:
    """The app uninstalled: every record of the workspace (of each workspace of the org, with
    `enterprise`); the installation store deletes the tokens."""

    def forget() -> Forgotten:
        keeper = retention(services.redis)
        gone = Forgotten()
        for each in keeper.teams_of(enterprise) if enterprise else [team]:
            if each:
                gone.add(keeper.forget_team(each, "uninstalled"))
        return gone

    return await asyncio.to_thread(forget)
