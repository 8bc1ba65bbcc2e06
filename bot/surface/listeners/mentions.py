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
from bot.desk.commands import spend_command
from bot.desk.plan_first import channel_plans_first, plan_first_command, plan_first_question
from bot.publishing.lifecycle import launch_and_post
from bot.publishing.render import render_help
from bot.services import EVENT_DEDUPE_TTL_SECONDS, Services
from bot.slack.events import MentionEvent, action_token_of, question_of
from bot.slack.replies import reply
from bot.surface.steering import thread_message
from jobs import Run

log = logging.getLogger(__name__)


def register(app: AsyncApp, services: Services) -> None:
    @app.event("app_mention")
    async def on_mention(event: dict[str, Any], body: dict[str, Any], client: AsyncWebClient) -> None:
        try:
            await handle_mention(services, client, event, body)
        except RedisError as exc:
            await storage_down(client, event, exc)


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
    services: Services, client: AsyncWebClient, event: dict[str, Any], body: dict[str, Any]
) -> None:
    try:
        mention = MentionEvent.model_validate(event)
    except ValidationError as exc:
        log.warning("ignored a malformed app_mention: %s", exc.errors()[:3])
        return
    if mention.bot_id or (services.bot_user_id and mention.user == services.bot_user_id):
        return  # our own or another bot's message
    event_id = body.get("event_id") or f"{mention.channel}:{mention.ts}"
    # Every run call goes to a thread (AsyncRuns): the event loop must stay free to ack other events.
    if not await services.runs.claim_event(f"event:{event_id}", EVENT_DEDUPE_TTL_SECONDS):
        log.info("dropped a repeated delivery of %s", event_id)
        return
    question = question_of(mention.text, services.bot_user_id)
    if mention.thread_ts and question and await services.runs.in_thread(mention.channel, mention.thread_ts):
        # A mention inside one of our threads steers or continues that research.
        await thread_message(
            services,
            client,
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
        user=mention.user,
        question=question,
        team=body.get("team_id"),
        action_token=action_token_of(event),
    )


async def handle_question(
    services: Services,
    client: AsyncWebClient,
    *,
    channel: str,
    thread_ts: str,
    user: str,
    question: str,
    team: str | None,
    action_token: SecretStr | None = None,
) -> None:
    """A new question, from a mention or a direct message: help, refuse with advice, or start."""
    answer = await spend_command(services, client, team=team, channel=channel, user=user, text=question)
    if answer is None:
        answer = await plan_first_command(services, client, team=team, channel=channel, user=user, text=question)
    if answer is not None:  # `usage`, `budget …`, `plan first on|off`: a command, not a question
        await reply(client, channel, thread_ts, answer)
        return
    planned = plan_first_question(question)
    plan_first = planned is not None or await asyncio.to_thread(channel_plans_first, services, team, channel)
    question = planned if planned is not None else question
    if services.channels and channel not in services.channels and not channel.startswith("D"):
        await reply(
            client,
            channel,
            thread_ts,
            "I am not enabled in this channel. Ask me in one of the channels "
            "the team set me up for, or in a direct message.",
        )
        return
    if not question:
        await reply(client, channel, thread_ts, render_help())
        return
    if len(question) > MAX_QUESTION_CHARS:
        await reply(
            client,
            channel,
            thread_ts,
            f"That question is {len(question):,} characters; I take up to {MAX_QUESTION_CHARS:,}. "
            "Ask the question in a sentence or two and share long material as a file in the thread.",
        )
        return
    over_budget = await asyncio.to_thread(services.spend.cap_refusal, team, channel)
    if over_budget:  # the channel's or workspace's monthly budget is spent: start nothing
        await reply(client, channel, thread_ts, over_budget)
        return
    state = await services.runs.start(
        Run(
            team=team,
            channel=channel,
            thread_ts=thread_ts,
            requester=user,
            question=question,
            private_sources=private_sources_allowed(services.workspace_search, channel),
            action_token=action_token,
            plan_first=plan_first,
        )
    )
    await launch_and_post(services, client, state)
