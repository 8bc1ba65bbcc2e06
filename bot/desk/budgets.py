"""`budget #channel $50/month`, `budget @person $20/month`, `budget workspace $200/month`,
`budget #channel off`: admins set the monthly budgets (jobs/budgets/spend.py keeps them; a person's covers
their questions in direct messages); anyone may read them with `budget`."""

from __future__ import annotations

import asyncio
import math
import re
from typing import Literal

from pydantic import BaseModel
from slack_sdk.web.async_client import AsyncWebClient

from bot.exceptions import BudgetSyntaxError
from bot.services import Services
from bot.slack.mrkdwn_escaping import escape_text
from jobs.budgets.spend import MICROS, Spend, usd

from .admins import is_admin
from .names import display_names

__all__ = ["BudgetChange", "BudgetSyntaxError", "budget_reply", "is_admin", "parse_budget"]

# "budget …" is a command only when what follows names a target or an amount (or nothing): a
# question that starts with the word ("budget airlines in Europe?") stays a question.
# Greedy `(.*)`, stripped after: a lazy group before `\s*$` is quadratic in a long run of whitespace.
COMMAND = re.compile(r"^\s*(?:<@\w+>\s*)?budgets?\b(.*)$", re.IGNORECASE | re.DOTALL)
TARGET_START = re.compile(r"^(?:<#|<@|#|@|workspace\b|here\b|this\s+channel\b|\$|\d|off\b)", re.IGNORECASE)
CHANNEL_REF = re.compile(r"^<#([CG][A-Z0-9]+)(?:\|[^>]*)?>\s*(.*)$", re.DOTALL)
PERSON_REF = re.compile(r"^<@([UW][A-Z0-9]+)(?:\|[^>]*)?>\s*(.*)$", re.DOTALL)
NAMED_PERSON = re.compile(r"^@([\w.-]+)")
CHANNEL_ID = re.compile(r"^#?([CG][A-Z0-9]{6,})\b\s*(.*)$", re.DOTALL)
NAMED_CHANNEL = re.compile(r"^#([\w.-]+)")
WORKSPACE = re.compile(r"^workspace\b\s*+(.*)$", re.IGNORECASE | re.DOTALL)
HERE = re.compile(r"^(?:here|this\s++channel)\b\s*+(.*)$", re.IGNORECASE | re.DOTALL)
OFF = re.compile(r"^(?:off|none|no\s+limit|unlimited|remove)$", re.IGNORECASE)
# A number is digits and commas, then optionally a dot and digits, ending in a digit: read
# atomically (`[\d,]*\.?\d+` would try every split of a digit run), then the digit checked behind.
_NUMBER = r"(?>[\d,]*+(?:\.\d++)?)(?<=\d)"
AMOUNT = re.compile(
    rf"^(?:\$\s*+(?P<a>{_NUMBER})|(?P<b>{_NUMBER})\s*+(?:\$|usd|dollars?))"
    r"\s*+(?:(?:/\s*+|(?:per|an?|each)\s++)(?P<period>[a-z]++))?$",
    re.IGNORECASE,
)
# Longer than any amount ("$1,000,000.00 per month"): refused before it is read at all.
AMOUNT_MAX_CHARS = 40
MONTH_WORDS = {"month", "mo", "mon", "monthly"}
# Far above any real team's research spend: a typo guard, not a policy.
MAX_BUDGET_USD = 1_000_000.0
EXAMPLES = (
    "`budget #channel $50/month`, `budget @person $20/month` (their direct messages), "
    "`budget workspace $200/month` or `budget #channel off`"
)


class BudgetChange(BaseModel):
    scope: Literal["channel", "workspace", "person"]
    channel: str = ""
    user: str = ""  # a person's budget: their questions in direct messages
    usd: float | None  # None: no cap ("off")


def parse_budget(text: str, here: str | None = None) -> BudgetChange | None:
    """None when `text` is not a budget command or only asks to see the budgets (no arguments:
    see `wants_budgets`); raises BudgetSyntaxError with advice when it is one but malformed.
    `here` is the channel the command was written in (for "here" / "this channel")."""
    match = COMMAND.match(text)
    rest = match.group(1).strip() if match else ""
    if not rest:
        return None
    if not TARGET_START.match(rest):
        return None
    scope: Literal["channel", "workspace", "person"]
    channel = user = ""
    if m := CHANNEL_REF.match(rest) or CHANNEL_ID.match(rest):
        scope, channel, rest = "channel", m.group(1), m.group(2)
    elif m := PERSON_REF.match(rest):
        scope, user, rest = "person", m.group(1), m.group(2)
    elif m := NAMED_PERSON.match(rest):
        raise BudgetSyntaxError(
            f"I cannot tell who “@{escape_text(m.group(1))}” is. Pick them from Slack's autocomplete as you type @ "
            f"so the message carries who it is, e.g. {EXAMPLES}."
        )
    elif m := WORKSPACE.match(rest):
        scope, rest = "workspace", m.group(1)
    elif m := HERE.match(rest):
        if not here or here.startswith("D"):
            raise BudgetSyntaxError(f"“here” is not a channel in a direct message. Name the channel: {EXAMPLES}.")
        scope, channel, rest = "channel", here, m.group(1)
    elif m := NAMED_CHANNEL.match(rest):
        raise BudgetSyntaxError(
            f"I cannot tell which channel “#{escape_text(m.group(1))}” is. Pick it from Slack's autocomplete as "
            f"you type # so the message carries the channel's link, e.g. {EXAMPLES}."
        )
    else:
        raise BudgetSyntaxError(f"Say which budget to set: a channel, a person or the workspace, e.g. {EXAMPLES}.")
    return BudgetChange(scope=scope, channel=channel, user=user, usd=_amount(rest.strip()))


def _amount(raw: str) -> float | None:
    if not raw:
        raise BudgetSyntaxError(f"Give the monthly amount in dollars, or `off`: {EXAMPLES}.")
    if OFF.match(raw):
        return None
    if len(raw) > AMOUNT_MAX_CHARS:
        raise BudgetSyntaxError(f"Give the monthly amount in dollars, e.g. {EXAMPLES}.")
    m = AMOUNT.match(raw)
    if not m:
        raise BudgetSyntaxError(
            f"I could not read “{escape_text(raw[:40])}” as an amount. Write dollars per month, e.g. {EXAMPLES}."
        )
    period = (m.group("period") or "month").lower()
    if period not in MONTH_WORDS:
        raise BudgetSyntaxError(
            f"Budgets are monthly; “{escape_text(period)}” is not a month. Write it per month, e.g. {EXAMPLES}."
        )
    digits = (m.group("a") or m.group("b")).replace(",", "")
    value = float(digits)
    if not math.isfinite(value) or value > MAX_BUDGET_USD:
        raise BudgetSyntaxError(
            f"{usd(round(min(value, 1e12) * MICROS))} a month is more than I take "
            f"(up to {usd(round(MAX_BUDGET_USD * MICROS))}); use `off` for no cap."
        )
    return round(value, 2)


def wants_budgets(text: str) -> bool:
    """`budget` / `budgets` alone: show the budgets in force."""
    match = COMMAND.match(text)
    return bool(match) and not match.group(1).strip()  # type: ignore[union-attr]


NOT_ADMIN = (
    "Only workspace admins can set budgets, so nothing changed. Ask an admin (or the operator, who can list "
    "you in DEEPTHREAD_ADMINS). Reply `usage` to see this month's spend."
)


async def budget_reply(
    services: Services, client: AsyncWebClient, change: BudgetChange, *, team: str | None, user: str
) -> str:
    if not await is_admin(services, client, user, team=team):
        return NOT_ADMIN
    spend: Spend = services.spend
    await asyncio.to_thread(spend.set_budget, team, change.scope, change.usd, change.channel, change.user)
    if change.scope == "person":  # named, never pinged (bot/desk/names.py)
        target = f"{(await display_names(client, [change.user]))[change.user]}'s questions in direct messages"
    else:
        target = "the workspace" if change.scope == "workspace" else f"<#{change.channel}>"
    caps = await asyncio.to_thread(spend.caps, team, change.channel or None, change.user or None)
    cap = next((c for c in caps if c.scope == change.scope), None)
    if change.usd is None or cap is None:
        return f"Budget lifted: {target} has no monthly cap now."
    state = (
        "it is already reached, so new questions there are refused until next month or a higher budget"
        if cap.reached
        else f"{usd(cap.left_micros)} left this month"
    )
    return (
        f"Budget set: {target} may spend {usd(cap.limit_micros)} a month ({usd(cap.spent_micros)} spent so far, "
        f"{state}). A run that reaches it mid-way finishes with what it has."
    )
