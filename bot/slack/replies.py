"""Short answers in a thread or to one person. A Slack refusal here is logged, never raised:
the answer is a courtesy, and the caller has nothing left to undo."""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.exceptions import NotInstalled

__all__ = ["reply", "reply_privately"]

log = logging.getLogger(__name__)


async def reply(client: AsyncWebClient, channel: str, thread_ts: str | None, text: str) -> None:
    try:
        await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
    except SlackApiError as exc:
        log.warning("could not reply in %s: %s", channel, exc.response.get("error"))
    except NotInstalled as exc:  # uninstalled since: there is nobody left to tell
        log.warning("could not reply in %s: %s", channel, exc)


async def reply_privately(
    client: AsyncWebClient, channel: str, user: str, text: str, thread_ts: str | None = None
) -> None:
    try:
        await client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread_ts)
    except SlackApiError as exc:
        log.warning("could not answer %s privately: %s", user, exc.response.get("error"))
