"""@deepthread <question>: start a run, answer in the thread, pin the report, enqueue."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import SecretStr, ValidationError
from redis.exceptions import RedisError
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from agent import MAX_QUESTION_CHARS, private_sources_allowed
from bot.catalogue import Words, words_for
from bot.desk.claim_check import claim_check_command
from bot.desk.commands import spend_command
from bot.desk.library import library_reply
from bot.desk.plan_first import channel_plans_first, plan_first_command
from bot.publishing.lifecycle import launch_and_post
from bot.publishing.progress_render import render_help
from bot.services import EVENT_DEDUPE_TTL_SECONDS, Services
from bot.slack.audience import shared_externally
from bot.slack.events import MentionEvent, action_token_of, malformed, question_of
from bot.slack.replies import reply, reply_privately
from bot.slack.tenancy import Tenant
from bot.surface.admission import NO_DMS, NOT_ENABLED, refusal
from bot.surface.reading import read_question, too_long
from bot.surface.steering import thread_message
from bot.text_reader import UnreadableText
from jobs import Run

log = logging.getLogger(__name__)


def register(app: AsyncApp, services: Services) -> None:
    @app.event("app_mention")
    async def on_mention(
        event: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]
    ) -> None:
        try:
            await handle_mention(
                services, client, event, body, Tenant.of_context(context, body), bot_user(services, context)
            )
        except RedisError as exc:
            await storage_down(client, event, exc)


def bot_user(services: Services, context: dict[str, Any]) -> str | None:
    """Our bot's user id in the event's workspace (each installation has its own bot user)."""
    return context.get("bot_user_id") or services.bot_user_id


# Said in the thread when run storage does not answer even after the client's reconnect backoff.
STORAGE_DOWN = (
    "I could not start on this: my run storage is not answering right now, so nothing was started. "
    "Please ask again in a minute."
)


async def storage_down(client: AsyncWebClient, event: dict[str, Any], exc: Exception) -> None:
    """Nothing is lost silently: the thread is told to try again (a Slack error here is only logged)."""
    log.error("run storage unavailable for an event in %s: %s", event.get("channel"), exc)
    channel, thread_ts = event.get("channel"), event.get("thread_ts") or event.get("ts")
    if not (channel and thread_ts):
        return
    try:
        await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=STORAGE_DOWN)
    except Exception as post_error:  # Slack trouble on top: the log line above is what is left
        log.warning("could not tell the thread to try again: %s", post_error)


async def handle_mention(
    services: Services,
    client: AsyncWebClient,
    event: dict[str, Any],
    body: dict[str, Any],
    tenant: Tenant,
    bot_user_id: str | None,
) -> None:
    try:
        mention = MentionEvent.model_validate(event)
    except ValidationError as exc:
        log.warning(malformed("app_mention", exc, body))
        return
    if mention.bot_id or (bot_user_id and mention.user == bot_user_id):
        return  # our own or another bot's message
    event_id = body.get("event_id") or f"{mention.channel}:{mention.ts}"
    # Every run call goes to a thread (AsyncRuns): the event loop must stay free to ack other events.
    if not await services.runs.claim_event(tenant.team, f"event:{event_id}", EVENT_DEDUPE_TTL_SECONDS):
        log.info("dropped a repeated delivery of %s", event_id)
        return
    await keep_for_slow_reads(services, tenant, mention.channel, mention.thread, event)
    question = question_of(mention.text, bot_user_id)
    if (
        mention.thread_ts
        and question
        and await services.runs.in_thread(tenant.team, mention.channel, mention.thread_ts)
    ):
        # A mention inside one of our threads steers or continues that research.
        await thread_message(
            services,
            client,
            tenant=tenant,
            channel=mention.channel,
            thread_ts=mention.thread_ts,
            ts=mention.ts,
            user=mention.user,
            text=question,
            event_id=event_id,
            action_token=action_token_of(event),
        )
        return
    await handle_question(
        services,
        client,
        channel=mention.channel,
        thread_ts=mention.thread,
        ts=mention.ts,
        user=mention.user,
        question=question,
        tenant=tenant,
        action_token=action_token_of(event),
    )


async def team_words(services: Services, team: str | None, channel: str, thread_ts: str) -> Words:
    """The team's language where no question says it (a mention with nothing after it): the thread's
    own runs' language, else that of the channel's latest question this month, else English."""
    latest = await services.runs.latest_in_thread(team, channel, thread_ts)
    if latest is not None:
        return words_for(latest.run.question)
    asked = await asyncio.to_thread(services.spend.channel_runs, team, channel)
    newest = max(asked, key=lambda r: r.finished_at, default=None)
    return words_for(newest.question if newest is not None else "")


async def keep_for_slow_reads(
    services: Services, tenant: Tenant, channel: str, thread_ts: str, event: dict[str, Any]
) -> None:
    """A distributed app (DEEPTHREAD_SLACK_DISTRIBUTED) keeps the messages its events bring to it, so its
    runs read their thread from them rather than from conversations.replies, which Slack allows it once a
    minute (bot/slack/thread_log.py)."""
    if services.thread_log is not None:
        await asyncio.to_thread(services.thread_log.record, tenant.team, channel, thread_ts, event)


async def handle_question(
    services: Services,
    client: AsyncWebClient,
    *,
    channel: str,
    thread_ts: str,
    user: str,
    question: str,
    tenant: Tenant,
    action_token: SecretStr | None = None,
    ts: str | None = None,
) -> None:
    """A new question, from a mention or a direct message (`ts`: the message that asks it): help,
    refuse with advice, or start."""
    direct = channel.startswith("D")
    if not direct and not services.takes_questions_in(channel):  # commands too: nothing is answered here
        await reply(client, channel, thread_ts, NOT_ENABLED)
        return
    if len(question) > MAX_QUESTION_CHARS:  # before any parsing: no command is this long
        await reply(client, channel, thread_ts, NO_DMS if direct and not services.dms else too_long(question))
        return
    team = tenant.team
    try:
        asked = await services.reader.read(read_question, question, channel)
    except UnreadableText as exc:
        await reply(client, channel, thread_ts, str(exc))
        return
    if asked.library is not None:  # `library <words>`: a command, never a paid run; private in a channel
        answer = await library_reply(
            services, client, asked.library, team=team, enterprise=tenant.enterprise, user=user
        )
        if direct:
            await reply(client, channel, thread_ts, answer)
        else:
            await reply_privately(client, channel, user, answer, thread_ts=thread_ts)
        return
    if asked.spend is not None:  # `usage`, `budget …`: a command, not a question (DMs too)
        answer = await spend_command(services, client, asked.spend, team=team, channel=channel, user=user)
        await reply(client, channel, thread_ts, answer)
        return
    if asked.plan_first_switch is not None:  # `plan first on|off`
        answer = await plan_first_command(
            services, client, team=team, channel=channel, user=user, on=asked.plan_first_switch
        )
        await reply(client, channel, thread_ts, answer)
        return
    if asked.claim_check is not None:  # `claim check [on|off]`: the workspace's setting
        answer = await claim_check_command(services, client, team=team, user=user, ask=asked.claim_check)
        await reply(client, channel, thread_ts, answer)
        return
    if direct and not services.dms:
        await reply(client, channel, thread_ts, NO_DMS)
        return
    planned = asked.planned
    plan_first = planned is not None or await asyncio.to_thread(channel_plans_first, services, team, channel)
    question = planned if planned is not None else question
    if not question:
        await reply(client, channel, thread_ts, render_help(await team_words(services, team, channel, thread_ts)))
        return
    if len(question) > MAX_QUESTION_CHARS:
        await reply(client, channel, thread_ts, too_long(question))
        return
    if tenant.enterprise_install and tenant.enterprise and team:  # the org's new-workspace budget, as an install's
        await asyncio.to_thread(services.spend.adopt_org_budget, tenant.enterprise, team)
    refused = await refusal(services, team=team, channel=channel, user=user)
    if refused:  # a monthly budget is spent (the same check as a continuation's): start nothing
        await reply(client, channel, thread_ts, refused)
        return
    # Only when the team's Slack may be searched at all: the lookup is a Slack call per question.
    shared = services.workspace_search != "off" and await shared_externally(client, channel, team, tenant.enterprise)
    state = await services.runs.start(
        Run(
            team=team,
            enterprise=tenant.enterprise,
            enterprise_install=tenant.enterprise_install,
            channel=channel,
            thread_ts=thread_ts,
            requester=user,
            question=question,
            private_sources=private_sources_allowed(services.workspace_search, channel) and not shared,
            shared_audience=shared,
            action_token=action_token,
            plan_first=plan_first,
            question_ts=ts,
        )
    )
    await launch_and_post(services, client, state)
