"""`usage`: this month's spend as a Slack message, shown by where it is shown and to whom.

- In a channel (a mention, a thread reply, `/deepthread usage` typed there by anyone but an
  admin): only that channel's runs and totals; in a direct message, only that conversation's
  (the person's own questions) and their personal budget.
- The workspace view (every channel's total, every person's, the most expensive runs) only to an
  admin, and only where nobody else reads it: a direct message with the bot, or the slash
  command's answer, which only its author sees.
- In the workspace view a private channel or a direct message appears as "a private channel" /
  "a direct message", with its totals only (never its questions, its id or a link to it), unless
  the viewer is in that conversation; Slack is asked (`conversations.info`, `conversations.members`)
  rather than anything assumed, and a conversation Slack does not vouch for in time is private.
- People are named (`users.info`), never mentioned: a usage list notifies no one.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from agent import utcnow
from bot.services import Services
from bot.slack.mrkdwn_escaping import escape_text, link
from jobs.budgets.spend import CapState, MonthUsage, RunSpend, Tally, is_direct, month_of, usd
from jobs.records.feedback import FeedbackStore
from jobs.records.feedback import Tally as Ratings

from .admins import is_admin
from .names import display_names

__all__ = ["USAGE", "Visibility", "conversation_kind", "render_usage", "usage_reply"]

log = logging.getLogger(__name__)

USAGE = re.compile(r"^\s*(?:<@\w+>\s*)?(?:usage|spend|costs?)\s*[.!?]?\s*$", re.IGNORECASE)
# Rows listed per group; the rest are summed into one "others" line, so each group adds up to the total.
ROWS_SHOWN = 8
QUESTION_CHARS = 60
TOP_RUNS_SHOWN = 5
# Slack lookups (permalinks, conversations, names) are made together, each given this long; a slow
# one is shown without its link, and a conversation Slack did not vouch for counts as private
# (a slash command must be answered within Slack's 3 s).
LOOKUP_TIMEOUT_SECONDS = 1.2
# Members read per conversation to learn whether the viewer is one of them.
MEMBERS_PAGE = 1000
WORKSPACE_HINT = (
    "_The workspace's spend, by channel and by person: admins, ask me in a direct message or with `/deepthread usage`._"
)


@dataclass
class Visibility:
    """Which conversations the viewer may see the questions of; everything else is totals only."""

    visible: set[str]
    kinds: dict[str, str]  # conversation id -> "public", "private" or "direct"

    def shown(self, channel: str) -> bool:
        return channel in ("", "-") or channel in self.visible

    def where(self, channel: str) -> str:
        if channel in ("", "-"):
            return "the terminal"
        if not self.shown(channel):
            return (
                "a direct message" if self.kinds.get(channel) == "direct" or is_direct(channel) else "a private channel"
            )
        return "a direct message" if is_direct(channel) else f"<#{channel}>"


def _runs(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def _group(title: str, rows: list[tuple[str, Tally]]) -> str:
    shown, rest = rows[:ROWS_SHOWN], rows[ROWS_SHOWN:]
    parts = [f"{name} {usd(t.micros)} ({_runs(t.runs)})" for name, t in shown]
    if rest:
        micros, runs = sum(t.micros for _, t in rest), sum(t.runs for _, t in rest)
        parts.append(f"{len(rest)} more {usd(micros)} ({_runs(runs)})")
    return f"*{title}:* " + (" · ".join(parts) if parts else "none")


def _cap_line(cap: CapState, here: str) -> str:
    who = {"workspace": "Workspace", "channel": here, "person": "Your direct messages"}[cap.scope]
    source = "set by an admin" if cap.overridden else "default"
    state = "reached" if cap.reached else f"{usd(cap.left_micros)} left"
    return f"{who}: {usd(cap.limit_micros)}/month ({source}), {usd(cap.spent_micros)} spent, {state}"


def _budgets(caps: list[CapState], here: str) -> str:
    if caps:
        return "*Budgets:* " + " · ".join(_cap_line(c, here) for c in caps)
    return "*Budgets:* none in force here (an admin can set one: `budget #channel $50/month`)"


def _title(run: RunSpend, permalink: str | None) -> str:
    question = " ".join(run.question.split())
    title = question if len(question) <= QUESTION_CHARS else question[: QUESTION_CHARS - 1].rstrip() + "…"
    title = f"“{title}”" if title else f"run {run.run_id}"
    return link(permalink, title) if permalink else f"{escape_text(title)} (run {run.run_id})"


def _top(
    runs: list[RunSpend], seen: Visibility, names: dict[str, str], links: dict[str, str], where: bool
) -> list[str]:
    lines = []
    for n, run in enumerate(runs[:TOP_RUNS_SHOWN], 1):
        who = names.get(run.user, "someone")
        if seen.shown(run.channel):
            place = f" in {seen.where(run.channel)}" if where else ""
            lines.append(f"{n}. {usd(run.micros)} · {_title(run, links.get(run.run_id))} · {who}{place}")
        else:  # its cost, and nothing of what was asked or where
            lines.append(f"{n}. {usd(run.micros)} · a question in {seen.where(run.channel)} · {who}")
    return lines


def render_usage(
    usage: MonthUsage,
    caps: list[CapState],
    channel: str | None,
    links: dict[str, str] | None = None,
    *,
    names: dict[str, str] | None = None,
    seen: Visibility | None = None,
    runs: list[RunSpend] | None = None,
    ratings: Ratings | None = None,
    channel_ratings: dict[str, Ratings] | None = None,
) -> str:
    """The reply, in Slack mrkdwn. With `channel` and `runs` (that channel's runs), the channel's own
    view; without, the workspace view, `seen` deciding which conversations' questions are shown.
    `links`: run id -> its thread's permalink; `names`: user id -> how to name them. `ratings`: the
    channel's 👍 / 👎 counts; `channel_ratings`: channel id -> its counts, for the workspace view."""
    links, names = links or {}, names or {}
    month = datetime.strptime(usage.month, "%Y-%m")
    if runs is not None and channel is not None:
        return _channel_view(month, channel, runs, caps, links, names, ratings)
    seen = seen or Visibility(visible=set(), kinds={})
    total = usage.total
    lines = [
        f"*Spend in {month:%B %Y}:* {usd(total.micros)} across {_runs(total.runs)} "
        f"({total.requests:,} model requests) · estimated at list prices"
    ]
    if total.runs:
        lines.append(_group("By channel", [(seen.where(t.key), t) for t in usage.channels]))
        lines.append(_group("By person", [(names.get(t.key, "someone"), t) for t in usage.users]))
        lines.append("*Most expensive runs:*")
        lines += _top(usage.top_runs, seen, names, links, where=True)
        rated = [(seen.where(key), r) for key, r in (channel_ratings or {}).items() if r.rated]
        if rated:  # counts only: a private channel is named as one, never its questions
            lines.append("*Feedback by channel:*")
            lines += [f"• {where}: {_ratings_line(r)}" for where, r in rated]
    lines.append(_budgets(caps, "This channel"))
    return "\n".join(lines)


def _ratings_line(ratings: Ratings, reports: int | None = None) -> str:
    """How many reports were rated (👍 / 👎) and the share rated helpful (most of their verdicts 👍)."""
    if not ratings.rated:
        return "no report rated yet"
    rated = f"{ratings.rated} of {reports}" if reports is not None else f"{ratings.rated}"
    return f"{rated} {'report' if ratings.rated == 1 and reports is None else 'reports'} rated · " + (
        f"{ratings.share or 0.0:.0%} rated helpful"
    )


def _channel_view(
    month: datetime,
    channel: str,
    runs: list[RunSpend],
    caps: list[CapState],
    links: dict[str, str],
    names: dict[str, str],
    ratings: Ratings | None = None,
) -> str:
    here = "this direct message" if is_direct(channel) else f"<#{channel}>"
    micros, requests = sum(r.micros for r in runs), sum(r.requests for r in runs)
    lines = [
        f"*Spend in {month:%B %Y} in {here}:* {usd(micros)} across {_runs(len(runs))} "
        f"({requests:,} model requests) · estimated at list prices"
    ]
    if runs:
        people: dict[str, Tally] = {}
        for run in runs:
            tally = people.setdefault(run.user, Tally(key=run.user))
            tally.micros, tally.runs, tally.requests = (
                tally.micros + run.micros,
                tally.runs + 1,
                tally.requests + run.requests,
            )
        ranked = sorted(people.values(), key=lambda t: (-t.micros, t.key))
        lines.append(_group("By person", [(names.get(t.key, "someone"), t) for t in ranked]))
        lines.append("*Most expensive runs here:*")
        everyone_here = Visibility(visible={channel}, kinds={})
        lines += _top(runs, everyone_here, names, links, where=False)
        if ratings is not None:
            lines.append(f"*Feedback:* {_ratings_line(ratings, len(runs))}")
    lines.append(_budgets(caps, "This channel"))
    lines.append(WORKSPACE_HINT)
    return "\n".join(lines)


# --- asking Slack -------------------------------------------------------------------------


async def _permalink(client: AsyncWebClient, run: RunSpend) -> tuple[str, str | None]:
    if not (run.channel and run.thread_ts and run.channel != "-"):
        return run.run_id, None
    try:
        answer = await asyncio.wait_for(
            client.chat_getPermalink(channel=run.channel, message_ts=run.thread_ts), LOOKUP_TIMEOUT_SECONDS
        )
        return run.run_id, str(answer["permalink"])
    except (SlackApiError, TimeoutError) as exc:  # deleted thread, slow Slack: listed without a link
        log.info("no permalink for run %s: %s", run.run_id, exc)
        return run.run_id, None


async def conversation_kind(client: AsyncWebClient, channel: str) -> str:
    """public, private or direct, as conversations.info says; private when Slack does not say."""
    try:
        info = (await asyncio.wait_for(client.conversations_info(channel=channel), LOOKUP_TIMEOUT_SECONDS))["channel"]
    except (SlackApiError, TimeoutError, KeyError) as exc:
        log.info("conversation %s counts as private: %s", channel, exc)
        return "direct" if is_direct(channel) else "private"
    if info.get("is_im") or info.get("is_mpim"):
        return "direct"
    return "private" if info.get("is_private") else "public"


async def _is_member(client: AsyncWebClient, channel: str, user: str) -> bool:
    try:
        answer = await asyncio.wait_for(
            client.conversations_members(channel=channel, limit=MEMBERS_PAGE), LOOKUP_TIMEOUT_SECONDS
        )
    except (SlackApiError, TimeoutError) as exc:
        log.info("membership of %s unknown: %s", channel, exc)
        return False
    return user in (answer.get("members") or [])


async def visibility(client: AsyncWebClient, channels: Iterable[str], viewer: str) -> Visibility:
    """Which of these conversations the viewer may see the questions of: the public ones, and the
    private ones and direct messages Slack lists the viewer in."""
    wanted = [c for c in dict.fromkeys(channels) if c and c != "-"]
    kinds = dict(zip(wanted, await asyncio.gather(*(conversation_kind(client, c) for c in wanted)), strict=True))
    private = [c for c in wanted if kinds[c] != "public"]
    members = await asyncio.gather(*(_is_member(client, c, viewer) for c in private))
    visible = {c for c in wanted if kinds[c] == "public"} | {c for c, m in zip(private, members, strict=True) if m}
    return Visibility(visible=visible, kinds=kinds)


async def usage_reply(
    services: Services,
    client: AsyncWebClient,
    team: str | None,
    channel: str | None,
    user: str = "",
    *,
    private: bool = False,
) -> str:
    """The reply for `usage` written in `channel` by `user`; `private`: only they will see it (the
    slash command's answer, or a direct message). Admins get the workspace view there."""
    spend = services.spend
    if private and user and await is_admin(services, client, user, team=team):
        usage = await asyncio.to_thread(spend.month, team)
        caps = await asyncio.to_thread(spend.caps, team, None)
        channels = [t.key for t in usage.channels] + [r.channel for r in usage.top_runs]
        seen = await visibility(client, channels, user)
        shown = [r for r in usage.top_runs if seen.shown(r.channel)]
        links, names = await asyncio.gather(
            asyncio.gather(*(_permalink(client, r) for r in shown)),
            display_names(client, [t.key for t in usage.users[:ROWS_SHOWN]] + [r.user for r in usage.top_runs]),
        )
        channel_ratings = await asyncio.to_thread(_channel_ratings, services, team, [t.key for t in usage.channels])
        return render_usage(
            usage, caps, None, {k: v for k, v in links if v}, names=names, seen=seen, channel_ratings=channel_ratings
        )
    here = channel or ""
    runs = await asyncio.to_thread(spend.channel_runs, team, here, month_of(utcnow()))
    caps = await asyncio.to_thread(spend.caps, team, here, user or None)
    usage = MonthUsage(
        team=team or "-",
        month=month_of(utcnow()),
        total=Tally(key="total"),
        channels=[],
        users=[],
        days=[],
        top_runs=[],
    )
    links_list, names = await asyncio.gather(
        asyncio.gather(*(_permalink(client, r) for r in runs[:TOP_RUNS_SHOWN])),
        display_names(client, list(dict.fromkeys(r.user for r in runs))[: ROWS_SHOWN * 2]),
    )
    ratings = await asyncio.to_thread(FeedbackStore(services.redis).tally, [r.run_id for r in runs])
    return render_usage(usage, caps, here, {k: v for k, v in links_list if v}, names=names, runs=runs, ratings=ratings)


def _channel_ratings(services: Services, team: str | None, channels: list[str]) -> dict[str, Ratings]:
    """Each listed channel's 👍 / 👎 counts this month (the channels the workspace view lists)."""
    store, month = FeedbackStore(services.redis), month_of(utcnow())
    return {
        channel: store.tally(r.run_id for r in services.spend.channel_runs(team, channel, month))
        for channel in channels[:ROWS_SHOWN]
    }
