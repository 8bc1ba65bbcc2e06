"""People named in what the desk posts (usage, budgets), without notifying them: a display name from
`users.info`, escaped, never a `<@U…>` mention; a plain form when Slack does not answer in time."""

from __future__ import annotations

import asyncio
import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.mrkdwn_escaping import escape_text

__all__ = ["NAME_TIMEOUT_SECONDS", "display_names", "plain_name"]

log = logging.getLogger(__name__)

# Names are looked up together, each given this long (a slash command is answered within 3 s).
NAME_TIMEOUT_SECONDS = 1.0


def plain_name(user: str) -> str:
    """A person shown without a lookup: their id as text ("user U0ANA"), which notifies no one."""
    return f"user {escape_text(user)}" if user and user != "-" else "someone"


async def _one(client: AsyncWebClient, user: str) -> tuple[str, str]:
    if not user or user == "-":
        return user, "someone"
    try:
        answer = await asyncio.wait_for(client.users_info(user=user), NAME_TIMEOUT_SECONDS)
        info = answer["user"]
        profile = info.get("profile") or {}
        name = profile.get("display_name") or profile.get("real_name") or info.get("real_name") or info.get("name")
        return user, escape_text(" ".join(str(name).split())[:60]) if name else plain_name(user)
    except (SlackApiError, TimeoutError, KeyError, TypeError) as exc:
        log.info("no name for %s: %s", user, exc)
        return user, plain_name(user)


async def display_names(client: AsyncWebClient, users: list[str]) -> dict[str, str]:
    """user id -> how to name them in a message (escaped mrkdwn, no mention)."""
    return dict(await asyncio.gather(*(_one(client, u) for u in dict.fromkeys(users))))
