"""Plan first, as the team asks for it: `plan first: <question>` for one question, or an admin's
`plan first on` / `plan first off` for every question in a channel (kept in the bot's own record,
bot/keys.py). A plan-first run posts its plan for approval before it spends its budget (jobs/lifecycle/planning.py)."""

from __future__ import annotations

import asyncio
import re

from slack_sdk.web.async_client import AsyncWebClient

from bot import keys
from bot.services import Services

from .admins import is_admin

__all__ = ["channel_plans_first", "plan_first_command", "plan_first_question", "plan_first_switch"]

_PREFIX = re.compile(r"^\s*plan\s+first\s*[:,;—–-]\s*(?P<question>\S.*)$", re.IGNORECASE | re.DOTALL)
_COMMAND = re.compile(r"^\s*plan\s+first\s+(?P<state>on|off)\s*[.!]?\s*$", re.IGNORECASE)


def plan_first_question(text: str) -> str | None:
    """The question after a `plan first:` prefix, or None when the text has none."""
    found = _PREFIX.match(text)
    return found.group("question").strip() if found else None


def channel_plans_first(services: Services, team: str | None, channel: str) -> bool:
    return bool(services.redis.hget(keys.plan_first(team), channel))


def plan_first_switch(text: str) -> bool | None:
    """`plan first on` (True) or `plan first off` (False), or None when `text` is not that command."""
    found = _COMMAND.match(text)
    return None if found is None else found.group("state").lower() == "on"


async def plan_first_command(
    services: Services, client: AsyncWebClient, *, team: str | None, channel: str, user: str, on: bool
) -> str:
    """The reply to `plan first on|off`: admins only."""
    if not await is_admin(services, client, user, team=team):
        return "Only a workspace admin (or one named in DEEPTHREAD_ADMINS) can change plan first for a channel."
    if on:
        await asyncio.to_thread(services.redis.hset, keys.plan_first(team), channel, "1")
        return (
            "Plan first is on in this channel: every question gets a plan to approve before any research. "
            "`plan first off` turns it off."
        )
    await asyncio.to_thread(services.redis.hdel, keys.plan_first(team), channel)
    return "Plan first is off in this channel: questions are researched at once (prefix one with `plan first:` to plan it)."
