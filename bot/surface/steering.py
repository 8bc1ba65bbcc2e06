"""What a person in the thread can do to a run: stop it, upgrade it, steer it, continue it.

Shared by the listeners (messages, mentions, reactions, buttons) so each rule lives once.
"""

from __future__ import annotations

import logging

from pydantic import SecretStr
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from agent import MAX_QUESTION_CHARS
from bot.desk.admins import may_control, only_who_may
from bot.desk.claim_check import claim_check_command
from bot.desk.commands import spend_command
from bot.desk.export import export_report
from bot.desk.library import library_reply
from bot.desk.recheck import handle_recheck, recheck_set_by
from bot.desk.retention import forget_thread_command
from bot.publishing.lifecycle import launch_and_post
from bot.publishing.link_policy import link_policy, shown
from bot.publishing.reader_text import footnote_numbers, for_reader
from bot.services import Services
from bot.slack.audience import shared_externally
from bot.slack.mrkdwn import to_mrkdwn
from bot.slack.mrkdwn_escaping import escape_text
from bot.slack.mrkdwn_split import shorten_mrkdwn
from bot.slack.replies import reply, reply_privately
from bot.slack.tenancy import Tenant
from bot.text_reader import UnreadableText
from jobs import RunState, RunStatus, Upgrade

from .admission import refusal
from .evidence import source_reply, sources_reply
from .reading import read_thread_reply, too_long

log = logging.getLogger(__name__)

# Earlier revisions shown per section in the thread, newest first (the rest via `deepthread inspect`).
HISTORY_REVISIONS_SHOWN = 5
NOTE_ACK_REACTION = "memo"
NOTED = "Noted: I will take this into account from the next step on."
PLAN_REDRAFTED = "Noted: I am redrafting the plan with this change; approve it once it fits."
PLAN_CHANGE_HOW = "Reply in this thread with what to change (a question to add, a part to drop, a smaller budget), and I will post a new plan."


async def stop_run(services: Services, client: AsyncWebClient, state: RunState, user: str, channel: str) -> None:
    run = state.run
    if state.status.finished:
        return
    if not await may_control(services, client, state, user):
        who = f"<@{run.requester}> (who asked)" if run.requester else "the person who asked"
        await reply_privately(client, channel, user, f"Only {who} or a workspace admin can stop this run.")
        return
    # The fallback (end the run as stopped and kill its job if it has not wound down after
    # DEEPTHREAD_HARD_STOP_SECONDS) is recorded with the request: serve or a worker carries it out.
    if not await services.runs.request_stop(run.id, f"<@{user}>"):
        return  # already stopping
    log.info("run %s: stop requested by %s", run.id, user)


async def thread_message(
    services: Services,
    client: AsyncWebClient,
    *,
    tenant: Tenant,
    channel: str,
    thread_ts: str,
    ts: str,
    user: str,
    text: str,
    event_id: str,
    action_token: SecretStr | None = None,
) -> None:
    """A human's message in a thread that has runs of this workspace: upgrade, steer, or continue."""
    latest = await services.runs.latest_in_thread(tenant.team, channel, thread_ts)
    if latest is None:
        return  # not a thread of ours (in this workspace)
    text = text.strip()
    if not text:
        return
    if len(text) > MAX_QUESTION_CHARS:  # before any reading: no command is this long, nor a note worth its context
        await reply(client, channel, thread_ts, too_long(text, "reply"))
        return
    try:
        asked = await services.reader.read(read_thread_reply, text, channel)
    except UnreadableText as exc:
        await reply(client, channel, thread_ts, str(exc))
        return
    if asked.library is not None:  # the team's earlier reports: only the asker sees the list in a channel
        answer = await library_reply(
            services, client, asked.library, team=tenant.team, enterprise=tenant.enterprise, user=user
        )
        if channel.startswith("D"):
            await reply(client, channel, thread_ts, answer)
        else:
            await reply_privately(client, channel, user, answer, thread_ts=thread_ts)
        return
    if asked.export is not None:  # the report as a file in the thread: a command, never a run
        await export_report(client, latest, asked.export, user)
        return
    if asked.forget:  # an admin's: the thread's stored data, deleted now
        await forget_thread_command(services, client, latest, user, channel, thread_ts)
        return
    recheck = asked.recheck
    if recheck is not None:
        if recheck.action == "set" and not await may_control(services, client, latest, user):
            # Each re-check is a run: scheduling them raises what the thread costs.
            await reply_privately(client, channel, user, only_who_may(latest, "schedule re-checks of this report"))
            return
        if (
            recheck.action == "off"
            and not await may_control(services, client, latest, user)
            and user != await recheck_set_by(services, latest)
        ):
            # The schedule is the requester's: a stranger's `off` would cancel what they asked for.
            await reply_privately(client, channel, user, only_who_may(latest, "switch off this report's re-checks"))
            return
        await handle_recheck(services, client, latest, recheck, user)
        return
    if asked.spend is not None:  # `usage`, `budget …`: only where questions are taken
        if services.takes_questions_in(channel) or channel.startswith("D"):
            answer = await spend_command(
                services, client, asked.spend, team=latest.run.team, channel=channel, user=user
            )
            await reply(client, channel, thread_ts, answer)
        return
    if asked.claim_check is not None:  # `claim check [on|off]`: the workspace's setting, a command
        answer = await claim_check_command(services, client, team=latest.run.team, user=user, ask=asked.claim_check)
        await reply(client, channel, thread_ts, answer)
        return
    if asked.go_deeper:
        await go_deeper(services, client, latest, event_id, channel, user)
        return
    if asked.history:
        await reply(client, channel, thread_ts, section_history(latest, asked.history_section))
        return
    if asked.footnote is not None or asked.sources:
        answer = source_reply(latest, asked.footnote) if asked.footnote is not None else sources_reply(latest)
        await reply(client, channel, thread_ts, answer)
        return
    if latest.status == RunStatus.planned and not latest.approved_by:  # plan first: a change to the plan
        if await services.runs.change_plan(latest.run.id, event_id, f"<@{user}>", text):
            await reply(client, channel, thread_ts, PLAN_REDRAFTED)
        return
    if not latest.status.finished:
        if await services.runs.add_note(latest.run.id, event_id, f"<@{user}>", text):
            await _acknowledge(client, channel, ts, thread_ts, NOTED)
        return
    await continue_thread(services, client, latest, text, user, event_id, ts, action_token)


def section_history(state: RunState, section_id: str | None) -> str:
    """Earlier revisions of the report's sections, as a thread reply (links only to the run's sources)."""
    state, allowed = shown(state), link_policy(state)
    sections = [s for s in state.sections if section_id in (None, s.section_id)]
    if not sections:
        known = ", ".join(s.section_id for s in state.sections) or "none yet"
        return f"There is no section {escape_text(section_id or '')} in this report (sections: {escape_text(known)})."
    revised = [s for s in sections if s.revisions]
    if not revised:
        return (
            "No section of this report has been revised."
            if section_id is None
            else f"{escape_text(section_id)} has not been revised."
        )
    lines = []
    numbers = footnote_numbers(state)  # markers become the report's own [n] (bot/publishing/reader_text.py)
    urls = {n: state.sources[m].url for m, n in numbers.items()}  # each [n] links to its source, as in the report
    for section in revised:
        # Model text: escaped like every other field the bot sends (no mention through a reason).
        lines.append(f"*{section.section_id} {escape_text(section.title)}*: revised ×{len(section.revisions)}")
        for n, revision in reversed(list(enumerate(section.revisions, 1))):
            if len(section.revisions) - n >= HISTORY_REVISIONS_SHOWN:
                break
            body = to_mrkdwn(for_reader(state, revision.body, numbers), urls, allowed)
            quoted = "\n".join("> " + line for line in shorten_mrkdwn(body, 300).split("\n"))
            reason = to_mrkdwn(for_reader(state, " ".join(revision.reason.split()), numbers), urls, allowed)
            lines.append(f"• version {n}, replaced because: {reason}\n{quoted}")
    return "\n".join(lines)


async def go_deeper(
    services: Services, client: AsyncWebClient, state: RunState, event_id: str, channel: str, user: str
) -> None:
    run = state.run
    if not await may_control(services, client, state, user):  # a deeper budget costs more: the requester's call
        await reply_privately(client, channel, user, only_who_may(state, "give this run the deep budget"))
        return
    upgrade = await services.runs.upgrade(run.id, event_id)
    if upgrade == Upgrade.next_run:
        await reply(
            client,
            channel,
            run.thread_ts,
            "This run has ended; the next one in this thread (reply with what to look into) will use the deep budget.",
        )
    elif upgrade == Upgrade.raised:
        await reply(
            client,
            channel,
            run.thread_ts,
            "Going deeper: this run's budget is raised to the deep profile from its next step.",
        )


async def continue_thread(
    services: Services,
    client: AsyncWebClient,
    parent: RunState,
    request: str,
    user: str,
    event_id: str,
    ts: str,
    action_token: SecretStr | None = None,
) -> None:
    """Continue the research; a reply that lost the race to another becomes a note of its run."""
    run = parent.run
    # A continuation is paid research like a new question: refused for the same reasons (a channel no
    # longer enabled, DMs switched off, a budget spent), in this thread.
    refused = await refusal(services, team=run.team, channel=run.channel or "", user=user)
    if refused:
        await reply(client, run.channel or "", run.thread_ts, refused)
        return
    # The channel may have been shared with another organization since the thread's last run.
    shared = services.workspace_search != "off" and await shared_externally(
        client, run.channel or "", run.team, run.enterprise
    )
    continuation = await services.runs.continue_from(
        parent,
        request,
        requester=user,
        author=f"<@{user}>",
        event_id=event_id,
        action_token=action_token,
        shared_audience=shared,
        question_ts=ts,
    )
    if continuation is None:
        return  # a repeated delivery
    if continuation.started:
        await launch_and_post(services, client, continuation.state, continuing=True)
    else:
        await _acknowledge(client, parent.run.channel or "", ts, parent.run.thread_ts or "", NOTED)


async def _acknowledge(client: AsyncWebClient, channel: str, ts: str, thread_ts: str, fallback: str) -> None:
    try:
        await client.reactions_add(channel=channel, timestamp=ts, name=NOTE_ACK_REACTION)
    except SlackApiError as exc:
        if exc.response.get("error") != "already_reacted":
            await reply(client, channel, thread_ts, fallback)


async def approve_plan(services: Services, client: AsyncWebClient, state: RunState, user: str, channel: str) -> None:
    """The Approve button: the requester or an admin starts the research the plan describes."""
    run = state.run
    if not await may_control(services, client, state, user):
        await reply_privately(client, channel, user, only_who_may(state, "approve this plan"))
        return
    refused = await refusal(services, team=run.team, channel=run.channel or channel, user=run.requester or user)
    if refused:  # the plan stays: approved once the budget is raised (or the channel enabled again)
        await reply(client, channel, run.thread_ts, refused)
        return
    approved = await services.runs.approve_plan(run.id, user)
    if approved is None:
        await reply_privately(
            client, channel, user, "This plan is no longer awaiting approval (it expired or was approved)."
        )
        return
    await reply(client, channel, run.thread_ts, f"Plan approved by <@{user}>: researching now.")
