"""The Home tab: what one person sees when they open the app (`app_home_opened` → `views.publish`, for
that person only): their runs still going (each with a stop button) and their latest finished ones,
what they spent this month, the budgets they may see, a search box over the team's library, and how
to ask. An admin also sees the workspace's month.

The view is built with slack_sdk's view models and checked by them (`View.validate_json`) before it
leaves; what people and models wrote is escaped like every message (bot/slack/mrkdwn_escaping.py).
`home_view` is pure: `publish_home` gathers what it shows (Redis, Slack) and publishes it."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime

from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import (
    Block,
    ButtonElement,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    InputBlock,
    MarkdownTextObject,
    PlainTextInputElement,
    SectionBlock,
)
from slack_sdk.models.blocks.basic_components import DispatchActionConfig
from slack_sdk.models.views import View
from slack_sdk.web.async_client import AsyncWebClient

from agent import shorten, utcnow
from bot.exceptions import NotInstalled
from bot.services import Services
from bot.slack.mrkdwn_escaping import escape_text, link
from bot.slack.readers import readers
from jobs.budgets.spend import CapState, MonthUsage, RunSpend, is_direct, usd
from jobs.lifecycle.person import ActiveRun, PersonRuns, person_runs
from jobs.records.library import Library, LibraryEntry

from .admins import is_admin
from .library import entry_line, visible_entries

__all__ = ["HOME_SEARCH_ACTION", "HOME_STOP_ACTION", "HomeContent", "home_view", "publish_home"]

log = logging.getLogger(__name__)

HOME_SEARCH_ACTION = "home_library_search"  # the search box: dispatched when Enter is pressed
HOME_STOP_ACTION = "home_stop"  # a running run's stop button; its value is the run id
QUESTION_CHARS = 90
# Channels whose budgets are shown: those of the person's runs this month, at most this many.
CHANNEL_BUDGETS_SHOWN = 5
# Slack lookups (permalinks) for the tab are made together, each given this long.
LOOKUP_SECONDS = 1.5
HELP = (
    "*How to ask:* mention @deepthread with a question in a channel, or write to me here in Messages. "
    "In a run's thread: reply to add a requirement, `go deeper` for a longer budget, react :octagonal_sign: "
    "to stop, `sources` for the evidence, `export pdf` for a file. Anywhere: `library <words>` for the team's "
    "earlier reports, `usage` for this month's spend."
)


@dataclass
class HomeContent:
    """What one person's Home tab shows, gathered (`publish_home`) apart from laid out (`home_view`)."""

    user: str
    runs: PersonRuns
    links: dict[str, str] = field(default_factory=dict)  # run id -> its thread's permalink
    caps: list[tuple[str, CapState]] = field(default_factory=list)  # (where, budget)
    month: str = ""  # "November 2026"
    workspace: MonthUsage | None = None  # an admin's
    library_size: int | None = None  # an admin's
    search: str | None = None
    found: list[LibraryEntry] = field(default_factory=list)


def _question(text: str, url: str | None) -> str:
    title = shorten(" ".join(text.split()), QUESTION_CHARS) or "(no question)"
    return link(url, title) if url else escape_text(title)


def _where(channel: str | None) -> str:
    if not channel:
        return "the terminal"
    return "a direct message" if is_direct(channel) else f"<#{channel}>"


def _active_block(active: ActiveRun, url: str | None) -> SectionBlock:
    run = active.run
    status = {"queued": "queued", "planned": "plan awaiting approval"}.get(active.status.value, "researching")
    return SectionBlock(
        text=MarkdownTextObject(text=f"🔎 {_question(run.question, url)} · {status} · {_where(run.channel)}"),
        accessory=ButtonElement(text="Stop", action_id=HOME_STOP_ACTION, value=run.id, style="danger"),
    )


def _recent_line(spent: RunSpend, url: str | None) -> str:
    when: datetime = spent.finished_at
    return f"• {_question(spent.question, url)} · {spent.status or 'finished'} · {when:%-d %b} · {usd(spent.micros)}"


def _cap_line(where: str, cap: CapState) -> str:
    source = "set by an admin" if cap.overridden else "default"
    state = "reached" if cap.reached else f"{usd(cap.left_micros)} left"
    return f"• {where}: {usd(cap.limit_micros)}/month ({source}), {usd(cap.spent_micros)} spent, {state}"


def _text(mrkdwn: str) -> SectionBlock:
    return SectionBlock(text=MarkdownTextObject(text=shorten(mrkdwn, 3000)))


def home_view(content: HomeContent) -> View:
    """The Home tab's view, checked by slack_sdk's model (ValueError when it would be refused)."""
    runs = content.runs
    blocks: list[Block] = [HeaderBlock(text="Your research"), _text("*Running now*")]
    if runs.active:
        blocks += [_active_block(a, content.links.get(a.run.id)) for a in runs.active]
    else:
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text="Nothing of yours is running.")]))
    blocks.append(_text("*Latest finished*"))
    if runs.recent:
        blocks.append(_text("\n".join(_recent_line(s, content.links.get(s.run_id)) for s in runs.recent)))
    else:
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text="No finished run of yours in two months.")]))
    blocks.append(DividerBlock())
    spend = f"*Your spend in {content.month}:* {usd(runs.spent_micros)} across {runs.runs} run" + (
        "" if runs.runs == 1 else "s"
    )
    blocks.append(_text(spend))
    if content.caps:
        blocks.append(_text("*Budgets:*\n" + "\n".join(_cap_line(where, cap) for where, cap in content.caps)))
    if content.workspace is not None:
        total = content.workspace.total
        line = (
            f"*The workspace in {content.month}* (admins see this): {usd(total.micros)} across {total.runs} run"
            f"{'' if total.runs == 1 else 's'} ({total.requests:,} model requests)"
        )
        if content.library_size is not None:
            line += f" · {content.library_size} report{'' if content.library_size == 1 else 's'} in the library"
        blocks.append(_text(line))
    blocks.append(DividerBlock())
    blocks.append(
        InputBlock(
            label="Search the team's library",
            element=PlainTextInputElement(
                action_id=HOME_SEARCH_ACTION,
                placeholder="a few words, e.g. expense ratio VTI",
                initial_value=content.search or None,
                dispatch_action_config=DispatchActionConfig(trigger_actions_on=["on_enter_pressed"]),
            ),
            dispatch_action=True,
            hint="Press Enter: earlier reports you can see, best first.",
        )
    )
    if content.search is not None:
        if content.found:
            head = f"*Earlier reports matching “{escape_text(content.search)}”:*"
            blocks.append(_text("\n".join([head, *(entry_line(e) for e in content.found)])))
        else:
            blocks.append(_text(f"No earlier report you can see matches “{escape_text(content.search)}”."))
    blocks += [DividerBlock(), ContextBlock(elements=[MarkdownTextObject(text=HELP)])]
    view = View(type="home", blocks=blocks, callback_id="deepthread_home")
    view.validate_json()
    return view


async def _permalink(client: AsyncWebClient, channel: str | None, ts: str | None) -> str | None:
    if not channel or not ts:
        return None
    try:
        answer = await asyncio.wait_for(client.chat_getPermalink(channel=channel, message_ts=ts), LOOKUP_SECONDS)
        return str(answer.get("permalink") or "") or None
    except (SlackApiError, TimeoutError, NotInstalled):
        return None


async def gather_home(
    services: Services,
    client: AsyncWebClient,
    *,
    team: str | None,
    enterprise: str | None,
    user: str,
    search: str | None = None,
) -> HomeContent:
    """Everything one person's Home tab shows, read for them now."""
    runs = await asyncio.to_thread(person_runs, services.redis, team, user)
    where = {a.run.id: (a.run.channel, a.run.thread_ts) for a in runs.active}
    where.update({s.run_id: (s.channel, s.thread_ts) for s in runs.recent})
    run_ids = list(where)
    found_links = await asyncio.gather(*(_permalink(client, *where[r]) for r in run_ids))
    links = {r: url for r, url in zip(run_ids, found_links, strict=True) if url}
    channels = [c for c in dict.fromkeys(s.channel for s in runs.recent) if c and not is_direct(c) and c not in ("-",)][
        :CHANNEL_BUDGETS_SHOWN
    ]
    who = readers()
    readable = await asyncio.gather(*(who.can_read(client, team, enterprise, user, c) for c in channels))
    caps: list[tuple[str, CapState]] = []
    for cap in await asyncio.to_thread(services.spend.caps, team, None, user):
        caps.append(("The workspace" if cap.scope == "workspace" else "Your direct messages with me", cap))
    for channel, ok in zip(channels, readable, strict=True):
        if ok:
            mine = await asyncio.to_thread(services.spend.caps, team, channel)
            caps += [(f"<#{channel}>", cap) for cap in mine if cap.scope == "channel"]
    content = HomeContent(user=user, runs=runs, links=links, caps=caps, month=f"{utcnow():%B %Y}", search=search)
    if await is_admin(services, client, user, team=team, enterprise=enterprise):
        content.workspace = await asyncio.to_thread(services.spend.month, team)
        content.library_size = await asyncio.to_thread(Library(services.redis).size, team)
    if search:
        content.found = await visible_entries(
            services, client, team=team, enterprise=enterprise, user=user, words=search
        )
    return content


async def publish_home(
    services: Services,
    client: AsyncWebClient,
    *,
    team: str | None,
    enterprise: str | None,
    user: str,
    search: str | None = None,
) -> None:
    """Publish `user`'s Home tab (for them only: views.publish names them)."""
    content = await gather_home(services, client, team=team, enterprise=enterprise, user=user, search=search)
    try:
        await client.views_publish(user_id=user, view=home_view(content).to_dict())
    except SlackApiError as exc:
        log.warning("the Home tab of %s was not published: %s", user, exc.response.get("error"))
