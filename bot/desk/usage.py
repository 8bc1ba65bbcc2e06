"""`usage`: this month's spend as a Slack message: total, per channel, per person, the most
expensive runs (linked to their threads), and the budgets in force."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from datetime import datetime

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.mrkdwn import escape_text, link
from jobs.spend import CapState, MonthUsage, RunSpend, Spend, Tally, usd

__all__ = ["USAGE", "render_usage", "usage_reply"]

log = logging.getLogger(__name__)

USAGE = re.compile(r"^\s*(?:<@\w+>\s*)?(?:usage|spend|costs?)\s*[.!?]?\s*$", re.IGNORECASE)
# Rows listed per group; the rest are summed into one "others" line, so each group adds up to the total.
ROWS_SHOWN = 8
QUESTION_CHARS = 60
# Permalinks are looked up together, each given this long; a slow one is shown without its link
# (a slash command must be answered within Slack's 3 s).
PERMALINK_TIMEOUT_SECONDS = 1.5


def _where(channel: str) -> str:
    if channel in ("", "-"):
        return "the terminal"
    if channel.startswith("D"):
        return "a direct message"
    return f"<#{channel}>"


def _who(user: str) -> str:
    return f"<@{user}>" if user and user != "-" else "someone"


def _runs(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def _group(title: str, tallies: list[Tally], name: Callable[[str], str]) -> str:
    shown, rest = tallies[:ROWS_SHOWN], tallies[ROWS_SHOWN:]
    parts = [f"{name(t.key)} {usd(t.micros)} ({_runs(t.runs)})" for t in shown]
    if rest:
        parts.append(f"{len(rest)} more {usd(sum(t.micros for t in rest))} ({_runs(sum(t.runs for t in rest))})")
    return f"*{title}:* " + (" · ".join(parts) if parts else "none")


def _cap_line(cap: CapState, channel: str) -> str:
    who = "Workspace" if cap.scope == "workspace" else _where(channel)
    source = "set by an admin" if cap.overridden else "default"
    state = "reached" if cap.reached else f"{usd(cap.left_micros)} left"
    return f"{who}: {usd(cap.limit_micros)}/month ({source}), {usd(cap.spent_micros)} spent, {state}"


def render_usage(
    usage: MonthUsage, caps: list[CapState], channel: str | None, links: dict[str, str] | None = None
) -> str:
    """The reply, in Slack mrkdwn. `links`: run id -> its thread's permalink."""
    links = links or {}
    month = datetime.strptime(usage.month, "%Y-%m")
    total = usage.total
    lines = [
        f"*Spend in {month:%B %Y}:* {usd(total.micros)} across {_runs(total.runs)} "
        f"({total.requests:,} model requests) · estimated at list prices"
    ]
    if total.runs:
        lines.append(_group("By channel", usage.channels, _where))
        lines.append(_group("By person", usage.users, _who))
        lines.append("*Most expensive runs:*")
        for n, run in enumerate(usage.top_runs, 1):
            lines.append(
                f"{n}. {usd(run.micros)} · {_run_title(run, links.get(run.run_id))} · {_who(run.user)} in "
                f"{_where(run.channel)}"
            )
    if caps:
        lines.append("*Budgets:* " + " · ".join(_cap_line(c, channel or "") for c in caps))
    else:
        lines.append("*Budgets:* none in force here (an admin can set one: `budget #channel $50/month`)")
    return "\n".join(lines)


def _run_title(run: RunSpend, permalink: str | None) -> str:
    question = " ".join(run.question.split())
    title = question if len(question) <= QUESTION_CHARS else question[: QUESTION_CHARS - 1].rstrip() + "…"
    title = f"“{title}”" if title else f"run {run.run_id}"
    return link(permalink, title) if permalink else f"{escape_text(title)} (run {run.run_id})"


async def _permalink(client: AsyncWebClient, run: RunSpend) -> tuple[str, str | None]:
    if not (run.channel and run.thread_ts and run.channel != "-"):
        return run.run_id, None
    try:
        answer = await asyncio.wait_for(
            client.chat_getPermalink(channel=run.channel, message_ts=run.thread_ts), PERMALINK_TIMEOUT_SECONDS
        )
        return run.run_id, str(answer["permalink"])
    except (SlackApiError, TimeoutError) as exc:  # deleted thread, slow Slack: listed without a link
        log.info("no permalink for run %s: %s", run.run_id, exc)
        return run.run_id, None


async def usage_reply(spend: Spend, client: AsyncWebClient, team: str | None, channel: str | None) -> str:
    usage = await asyncio.to_thread(spend.month, team)
    caps = await asyncio.to_thread(spend.caps, team, channel)
    links = dict(await asyncio.gather(*(_permalink(client, run) for run in usage.top_runs)))
    return render_usage(usage, caps, channel, {k: v for k, v in links.items() if v})
