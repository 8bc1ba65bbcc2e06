"""`claim check off` / `claim check on`: a workspace's admins decide whether every cited claim of its
reports is held to its source (agent/claims); `claim check` alone says where it stands. Kept in the
workspace's settings (jobs/records/workspace_settings.py), read by each run when it starts.
DEEPTHREAD_CLAIM_CHECK=off turns the check off for the whole deployment, whatever a workspace chose."""

from __future__ import annotations

import asyncio
import re
from typing import Literal

from slack_sdk.web.async_client import AsyncWebClient

from bot.services import Services
from jobs.records.workspace_settings import claim_check_on, set_claim_check

from .admins import is_admin

__all__ = ["ClaimCheckAsk", "claim_check_command", "claim_check_switch"]

ClaimCheckAsk = Literal["on", "off", "show"]

# "claim check off", "claims check on", "claim-check", "@deepthread claim check": the words alone, so a
# question that starts with them ("claim check rules in Germany?") stays a question.
_COMMAND = re.compile(r"^\s*(?:<@\w+>\s*)?claims?[\s-]+check(?:\s+(?P<state>on|off))?\s*[.!]?\s*$", re.IGNORECASE)

WHAT_IT_DOES = (
    "Every sentence of a report that cites a source is checked against that source: its figures, names and "
    "dates, and whether the source says what the sentence says. Claims it cannot find are sent back to the "
    "research to fix; one kept anyway is marked ⚠ in the report."
)
NOT_ADMIN = "Only a workspace admin (or one named in DEEPTHREAD_ADMINS) can turn the claim check on or off."
OFF_FOR_DEPLOYMENT = (
    "The claim check is off for this whole deployment (DEEPTHREAD_CLAIM_CHECK=off): ask the operator to turn it on."
)


def claim_check_switch(text: str) -> ClaimCheckAsk | None:
    """`claim check on|off` (or `claim check` alone: where it stands), or None when `text` is not that command."""
    found = _COMMAND.match(text)
    if found is None:
        return None
    state = (found.group("state") or "").lower()
    return "on" if state == "on" else "off" if state == "off" else "show"


async def claim_check_command(
    services: Services, client: AsyncWebClient, *, team: str | None, user: str, ask: ClaimCheckAsk
) -> str:
    """The reply to `claim check [on|off]`: anyone may ask where it stands; admins change it."""
    if ask == "show":
        if not services.claim_check:
            return OFF_FOR_DEPLOYMENT
        on = await asyncio.to_thread(claim_check_on, services.redis, team)
        state = "on" if on else "off (an admin turned it off: `claim check on` turns it back on)"
        return f"The claim check is {state} in this workspace. {WHAT_IT_DOES}"
    if not await is_admin(services, client, user, team=team):
        return NOT_ADMIN
    await asyncio.to_thread(set_claim_check, services.redis, team, ask == "on")
    if ask == "off":
        return (
            "The claim check is off in this workspace from the next run on: reports keep their figure check, but "
            "their other claims are no longer held to their sources. `claim check on` turns it back on."
        )
    note = f" ({OFF_FOR_DEPLOYMENT})" if not services.claim_check else ""
    return f"The claim check is on in this workspace from the next run on.{note} {WHAT_IT_DOES}"
