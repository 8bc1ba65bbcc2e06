"""The spend commands, wherever they are written (a DM, a thread of ours, `/deepthread …`):
`usage` (and `budget` alone) show this month's spend; `budget <target> <amount>` sets a budget."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from bot.exceptions import BudgetSyntaxError
from bot.services import Services
from jobs.spend import is_direct

from .budgets import budget_reply, parse_budget, wants_budgets
from .usage import USAGE, usage_reply

__all__ = ["spend_command"]


async def spend_command(
    services: Services,
    client: AsyncWebClient,
    *,
    team: str | None,
    channel: str | None,
    user: str,
    text: str,
    private: bool = False,
) -> str | None:
    """The reply to a spend command, or None when `text` is not one (then it is a question or a note).
    `private`: only `user` will see the reply (the slash command's answer, a direct message)."""
    if USAGE.match(text) or wants_budgets(text):
        return await usage_reply(services, client, team, channel, user, private=private or is_direct(channel))
    try:
        change = parse_budget(text, here=channel)
    except BudgetSyntaxError as exc:
        return str(exc)
    if change is None:
        return None
    return await budget_reply(services, client, change, team=team, user=user)
