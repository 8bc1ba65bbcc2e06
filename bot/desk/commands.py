"""The spend commands, wherever they are written (a DM, a thread of ours, `/deepthread …`):
`usage` (and `budget` alone) show this month's spend; `budget <target> <amount>` sets a budget.

Reading a text (`read_spend`, pure, so serve may run it in its text reader's child) is apart from
acting on what it asks (`spend_command`, on the loop with Redis and Slack)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel
from slack_sdk.web.async_client import AsyncWebClient

from bot.exceptions import BudgetSyntaxError
from bot.services import Services
from jobs.budgets.spend import is_direct

from .budgets import BudgetChange, budget_reply, parse_budget, wants_budgets
from .usage import USAGE, usage_reply

__all__ = ["SpendRequest", "read_spend", "spend_command"]


class SpendRequest(BaseModel, frozen=True):
    """What a spend command asks: the usage, a budget change, or advice for a malformed one."""

    kind: Literal["usage", "change", "malformed"]
    change: BudgetChange | None = None
    problem: str = ""


def read_spend(text: str, channel: str | None) -> SpendRequest | None:
    """The spend command in `text`, or None when it is not one (then it is a question or a note)."""
    if USAGE.match(text) or wants_budgets(text):
        return SpendRequest(kind="usage")
    try:
        change = parse_budget(text, here=channel)
    except BudgetSyntaxError as exc:
        return SpendRequest(kind="malformed", problem=str(exc))
    return None if change is None else SpendRequest(kind="change", change=change)


async def spend_command(
    services: Services,
    client: AsyncWebClient,
    request: SpendRequest,
    *,
    team: str | None,
    channel: str | None,
    user: str,
    private: bool = False,
) -> str:
    """The reply to a spend command. `private`: only `user` will see the reply (the slash
    command's answer, a direct message)."""
    if request.kind == "usage":
        return await usage_reply(services, client, team, channel, user, private=private or is_direct(channel))
    if request.kind == "malformed" or request.change is None:
        return request.problem
    return await budget_reply(services, client, request.change, team=team, user=user)
