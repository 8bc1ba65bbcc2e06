"""Whether paid research may start here: one check for every way it starts (a new question, a
continuation in a thread, an approved plan), so a refusal is the same wherever research would
start and is told in that thread, each time. Nothing is remembered between refusals: each thread
that asks is told why nothing started."""

from __future__ import annotations

import asyncio

from bot.services import Services

__all__ = ["NOT_ENABLED", "NO_DMS", "refusal"]

NOT_ENABLED = (
    "I am not enabled in this channel. Ask me in one of the channels the team set me up for, or in a direct message."
)
NO_DMS = (
    "I do not take questions in direct messages here (the team switched that off). Ask me in a channel "
    "I am in, by mentioning @deepthread; `usage` still works here."
)


async def refusal(services: Services, *, team: str | None, channel: str, user: str | None) -> str | None:
    """Why research may not start for `user` in `channel` (the reply to post in the thread), or None:
    the channel is not one the bot is enabled in (DEEPTHREAD_CHANNELS), a direct message where DMs
    are off (DEEPTHREAD_DMS), or a monthly budget of the channel, the person or the workspace is spent."""
    direct = channel.startswith("D")
    if not direct and not services.takes_questions_in(channel):
        return NOT_ENABLED
    if direct and not services.dms:
        return NO_DMS
    return await asyncio.to_thread(services.spend.cap_refusal, team, channel, user)
