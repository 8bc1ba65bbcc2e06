"""`/deepthread …`: the slash command. Answered in the ack itself (only the person sees it), so
the reply needs no channel membership and arrives within Slack's 3 s."""

from __future__ import annotations

import logging
from typing import Any

from redis.exceptions import RedisError
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from agent import MAX_QUESTION_CHARS
from bot.desk.commands import spend_command
from bot.desk.library import library_reply
from bot.services import Services
from bot.slack.outgoing import inert
from bot.slack.tenancy import Tenant
from bot.surface.reading import read_slash
from bot.text_reader import UnreadableText

__all__ = ["SLASH_COMMAND", "register"]

log = logging.getLogger(__name__)

SLASH_COMMAND = "/deepthread"  # as declared in manifest.yml (features.slash_commands)
HELP = (
    "`/deepthread library expense ratio VTI` lists the team's earlier reports you can see that match. "
    "`/deepthread usage` shows this month's spend: total, per channel, per person, the most expensive runs. "
    "Admins set monthly budgets with `/deepthread budget #channel $50/month`, "
    "`/deepthread budget workspace $200/month` or `/deepthread budget #channel off`. "
    "To ask a research question, mention @deepthread in a channel or send me a direct message."
)
NOT_ENABLED = (
    "I am not enabled in this channel, so I answer nothing here. Use `/deepthread` in one of the channels the "
    "team set me up for, or in a direct message with me."
)
STORAGE_DOWN_LIBRARY = (
    "My storage is not answering right now, so I cannot search the library. Please try again in a minute."
)
STORAGE_DOWN = "My storage is not answering right now, so I cannot read the spend. Please try again in a minute."


def register(app: AsyncApp, services: Services) -> None:
    @app.command(SLASH_COMMAND)
    async def on_command(
        ack: AsyncAck, command: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]
    ) -> None:
        # The answer rides in the ack, not through the Web API client: the same rule by hand.
        await ack(text=inert(await answer(services, client, command, Tenant.of_context(context, command))))


async def answer(services: Services, client: AsyncWebClient, command: dict[str, Any], tenant: Tenant) -> str:
    text = str(command.get("text") or "").strip()
    channel = str(command.get("channel_id") or "")
    if not channel.startswith("D") and not services.takes_questions_in(channel):
        return NOT_ENABLED
    if len(text) > MAX_QUESTION_CHARS:  # before any reading: no command is this long
        return HELP
    try:
        reading = await services.reader.read(read_slash, text, channel)
    except UnreadableText as exc:
        return str(exc)
    user = str(command.get("user_id") or "")
    if reading.library is not None:  # answered in the ack: only the person who typed it sees it
        try:
            return await library_reply(
                services, client, reading.library, team=tenant.team, enterprise=tenant.enterprise, user=user
            )
        except RedisError as exc:
            log.error("slash command: run storage unavailable: %s", exc)
            return STORAGE_DOWN_LIBRARY
    asked = reading.spend
    if asked is None:
        return HELP
    try:
        reply = await spend_command(
            services,
            client,
            asked,
            team=tenant.team,
            channel=channel,
            user=user,
            private=True,  # answered in the ack: only the person who typed it sees it
        )
    except RedisError as exc:
        log.error("slash command: run storage unavailable: %s", exc)
        return STORAGE_DOWN
    return reply
