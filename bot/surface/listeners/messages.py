"""Thread replies: a note for the running loop, "go deeper", or a continuation after the end.
Our own messages, other bots, edits and messages mentioning us (the mention listener handles
those) are ignored. A deleted question or report deletes its thread's data
(bot/desk/retention.py): Slack sends `message_deleted` with the `deleted_ts`, or, for a message
that has replies (a question), `message_changed` to a `tombstone`."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from redis.exceptions import RedisError
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.desk.retention import forget_deleted_message
from bot.services import EVENT_DEDUPE_TTL_SECONDS, Services
from bot.slack.events import MessageEvent, action_token_of
from bot.slack.tenancy import Tenant
from bot.surface.steering import thread_message

from .mentions import bot_user, handle_question, keep_for_slow_reads, storage_down

log = logging.getLogger(__name__)


def register(app: AsyncApp, services: Services) -> None:
    @app.event("message")
    async def on_message(
        event: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]
    ) -> None:
        try:
            await handle_message(
                services, client, event, body, Tenant.of_context(context, body), bot_user(services, context)
            )
        except RedisError as exc:
            await storage_down(client, event, exc)


async def handle_message(
    services: Services,
    client: AsyncWebClient,
    event: dict[str, Any],
    body: dict[str, Any],
    tenant: Tenant,
    bot_user_id: str | None,
) -> None:
    deleted = deleted_ts(event)
    if deleted is not None:
        await forget_deleted_message(
            services, tenant.team, str(event.get("channel") or ""), deleted, in_thread=deleted_from_thread(event)
        )
        return
    try:
        message = MessageEvent.model_validate(event)
    except ValidationError:
        return
    direct = message.channel_type == "im"
    if message.subtype or message.bot_id or not message.user or not (message.thread_ts or direct):
        return  # edits, deletions, bots (us included) and top-level chatter in channels
    if message.user == bot_user_id or (bot_user_id and f"<@{bot_user_id}>" in message.text):
        return
    event_id = body.get("event_id") or f"{message.channel}:{message.ts}"
    if not await services.runs.claim_event(tenant.team, f"event:{event_id}", EVENT_DEDUPE_TTL_SECONDS):
        return
    if message.thread_ts and services.thread_log is not None:  # a reply in one of our threads: kept
        if await services.runs.latest_in_thread(tenant.team, message.channel, message.thread_ts) is not None:
            await keep_for_slow_reads(services, tenant, message.channel, message.thread_ts, event)
    # A direct message to the bot is a question, a reply in one of its threads too unless that thread
    # has research to steer or continue (a thread whose question was refused is asked again, and told again).
    thread_ts = message.thread_ts
    if direct and (thread_ts is None or not await services.runs.in_thread(tenant.team, message.channel, thread_ts)):
        await handle_question(
            services,
            client,
            channel=message.channel,
            thread_ts=thread_ts or message.ts,
            ts=message.ts,
            user=message.user,
            question=message.text.strip(),
            tenant=tenant,
            action_token=action_token_of(event),
        )
        return
    if thread_ts is None:
        return  # (a channel's top-level chatter was left above)
    await thread_message(
        services,
        client,
        tenant=tenant,
        channel=message.channel,
        thread_ts=thread_ts,
        ts=message.ts,
        user=message.user,
        text=message.text,
        event_id=event_id,
        action_token=action_token_of(event),
    )


def deleted_ts(event: dict[str, Any]) -> str | None:
    """The ts of the message this event says was deleted, if it says so."""
    if event.get("subtype") == "message_deleted":
        return event.get("deleted_ts") or None
    changed = event.get("message") or {}
    if event.get("subtype") == "message_changed" and changed.get("subtype") == "tombstone":
        return changed.get("ts") or None
    return None


def deleted_from_thread(event: dict[str, Any]) -> str | None:
    """The thread the deleted message was a reply in (a follow-up, a mention in someone's thread), if it was."""
    previous = event.get("previous_message") or {}
    thread_ts = previous.get("thread_ts") if isinstance(previous, dict) else None
    return str(thread_ts) if thread_ts else None
