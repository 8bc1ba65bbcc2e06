"""Re-checks in Slack: the `recheck …` commands in a thread, and serve's sweep that shows what
the re-check jobs (jobs/upkeep/recheck.py) recorded: the re-check runs, the skipped checks, and each
re-check's digest of what changed.

    recheck                  show the thread's schedule
    recheck weekly           also `daily`, `monthly`, `every 3 days`, `every 2 weeks`
    recheck in 30 days       one check; also hours, minutes, seconds (a single check cannot loop)
    recheck off              switch re-checks off (also `stop`, `cancel`)

A repeated command replaces the schedule. Text that is not one of these (`recheck the fees
against 2025 data`) is an ordinary reply: it continues the research.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Literal

from slack_sdk.web.async_client import AsyncWebClient

from bot.publishing.lifecycle import post_messages
from bot.services import Services
from bot.slack.replies import reply
from bot.slack.tenancy import Tenant, acting_for
from jobs import RunState
from jobs.upkeep.recheck import (
    DAY_SECONDS,
    MAX_DELAY_SECONDS,
    MIN_REPEAT_SECONDS,
    WEEK_SECONDS,
    Rechecks,
    Schedule,
    next_check_words,
)

from .recheck_digest import digest

__all__ = [
    "RECHECK_CHECK_SECONDS",
    "RecheckCommand",
    "handle_recheck",
    "parse_recheck",
    "post_recheck_news",
    "recheck_set_by",
]

log = logging.getLogger(__name__)

# How often serve looks for re-check runs to show, lines to say and digests owed (three small
# Redis reads when there is nothing to do): a re-check's messages appear within seconds.
RECHECK_CHECK_SECONDS = 2.0

_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": DAY_SECONDS, "week": WEEK_SECONDS}
_NAMED = {"daily": DAY_SECONDS, "weekly": WEEK_SECONDS, "monthly": 30 * DAY_SECONDS}
_COUNT = r"(?P<n>\d{1,4}|an?|one)"
_UNIT = r"(?P<unit>second|minute|hour|day|week)s?"
# Greedy `(.*)`, its trailing spaces and stops trimmed after: a lazy group before `[\s.!]*$` is
# quadratic in a long run of whitespace.
RECHECK = re.compile(r"^\s*(?:<@\w+>\s*)?re-?check\b(?P<rest>.*)$", re.IGNORECASE | re.DOTALL)
_OFF = re.compile(r"^(?:off|stop|cancel|none|never)$", re.IGNORECASE)
_ONCE = re.compile(rf"^in\s+{_COUNT}\s+{_UNIT}$", re.IGNORECASE)
_EVERY = re.compile(rf"^every\s+(?:{_COUNT}\s+)?{_UNIT}$", re.IGNORECASE)
HOW = "Reply `recheck weekly`, `recheck in 30 days`, or `recheck off`."


@dataclass(frozen=True)
class RecheckCommand:
    action: Literal["show", "off", "set", "refused"]
    seconds: int = 0
    repeat: bool = False
    problem: str = ""  # why a well-formed command was refused (too often, too far out)


def parse_recheck(text: str) -> RecheckCommand | None:
    """The command in a thread reply, or None when the reply is not one (it continues the research)."""
    match = RECHECK.match(text)
    if match is None:
        return None
    rest = " ".join(match.group("rest").split()).lower().rstrip(" .!")
    if not rest:
        return RecheckCommand("show")
    if _OFF.match(rest):
        return RecheckCommand("off")
    if rest in _NAMED:
        return _checked(_NAMED[rest], repeat=True)
    for pattern, repeat in ((_ONCE, False), (_EVERY, True)):
        found = pattern.match(rest)
        if found:
            n = found.group("n")
            count = int(n) if n and n.isdigit() else 1
            return _checked(count * _UNIT_SECONDS[found.group("unit").lower()], repeat=repeat)
    return None


def _checked(seconds: int, *, repeat: bool) -> RecheckCommand:
    if seconds < 1:
        return RecheckCommand("refused", problem=f"A re-check needs a wait of at least a second. {HOW}")
    if repeat and seconds < MIN_REPEAT_SECONDS:
        return RecheckCommand(
            "refused",
            problem="Re-checks repeat at most daily (each one is a research run): try `recheck daily`, "
            "or `recheck in 6 hours` for a single check.",
        )
    if seconds > MAX_DELAY_SECONDS:
        days = MAX_DELAY_SECONDS // DAY_SECONDS
        return RecheckCommand(
            "refused",
            problem=f"A report is kept for 90 days after its last run, so re-checks can be at most {days} days "
            f"apart: try `recheck in {days} days` or `recheck monthly`.",
        )
    return RecheckCommand("set", seconds=seconds, repeat=repeat)


def describe(schedule: Schedule) -> str:
    """'weekly', 'every 3 days', 'once'."""
    every = schedule.every_seconds
    if every is None:
        return "once"
    named = {seconds: name for name, seconds in _NAMED.items()}
    if every in named:
        return named[every]
    return f"every {every // DAY_SECONDS} days" if every % DAY_SECONDS == 0 else f"every {every // 3600} hours"


async def recheck_set_by(services: Services, latest: RunState) -> str | None:
    """Who set the thread's re-check schedule (they may switch it off, as the requester and admins may)."""
    run = latest.run
    schedule = await asyncio.to_thread(Rechecks(services.redis).get, run.team, run.channel or "", run.thread_ts or "")
    return schedule.set_by if schedule is not None else None


async def handle_recheck(
    services: Services, client: AsyncWebClient, latest: RunState, command: RecheckCommand, user: str
) -> None:
    """Carry out a `recheck …` command from a thread reply and confirm it in the thread."""
    run = latest.run
    channel, thread_ts = run.channel or "", run.thread_ts or ""
    rechecks = Rechecks(services.redis)
    if command.action == "refused":
        answer = command.problem
    elif command.action == "show":
        schedule = await asyncio.to_thread(rechecks.get, run.team, channel, thread_ts)
        answer = (
            f"No re-check is scheduled for this report. {HOW}"
            if schedule is None
            else f"Re-checks: {describe(schedule)}, set by <@{schedule.set_by}>; "
            f"{next_check_words(schedule)}. `recheck off` switches them off."
        )
    elif command.action == "off":
        old = await asyncio.to_thread(rechecks.cancel, run.team, channel, thread_ts)
        answer = (
            "No re-check was scheduled for this report."
            if old is None
            else f"Re-checks are off for this report (they were {describe(old)})."
        )
    else:
        planned, replaced = await asyncio.to_thread(
            lambda: rechecks.set(
                run.team, channel, thread_ts, seconds=command.seconds, repeat=command.repeat, set_by=user
            )
        )
        what = "Re-check schedule replaced" if replaced else "Re-check scheduled"
        answer = (
            f"{what}: {describe(planned)}; {next_check_words(planned)}. Each re-check verifies the report's "
            "dated figures and claims against fresh sources, revises only the sections whose facts changed, "
            "and posts here what changed. `recheck off` cancels."
        )
    log.info("thread %s/%s: recheck %s by %s", channel, thread_ts, command.action, user)
    await reply(client, channel, thread_ts, answer)


# --- serve's sweep -------------------------------------------------------------------------


async def post_recheck_news(services: Services, client: AsyncWebClient) -> None:
    """Show re-check runs at once, say skipped checks, and post each ended re-check's digest,
    each with the token of the installation whose thread it is."""
    rechecks = Rechecks(services.redis)
    for state in await asyncio.to_thread(rechecks.runs_to_show):
        # The lease the orphan sweep takes too: one process posts the run's messages.
        if state.run.progress_message is None and await services.runs.claim_posting(state.run.id):
            if await post_messages(services, client, state, continuing=True):
                log.info("re-check run %s shown in %s", state.run.id, state.run.channel)
        await asyncio.to_thread(rechecks.shown, state.run.id)
    for notice in await asyncio.to_thread(rechecks.take_notices):
        tenant = Tenant(team=notice.team, enterprise=notice.enterprise, enterprise_install=notice.enterprise_install)
        with acting_for(tenant):
            await reply(client, notice.channel, notice.thread_ts, notice.text)
    for recheck, parent, state in await asyncio.to_thread(rechecks.digests_due):
        schedule = await asyncio.to_thread(rechecks.ended, recheck, state)
        with acting_for(Tenant.of_run(state.run)):
            await reply(client, recheck.channel, recheck.thread_ts, digest(recheck, parent, state, schedule))
        log.info("re-check run %s: digest posted", recheck.run_id)
