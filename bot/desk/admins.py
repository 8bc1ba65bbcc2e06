"""Who may raise what a run costs, and who is an admin.

Cost-raising controls (go deeper, re-check schedules, budgets) and stopping belong to the person
who asked and to admins; notes and follow-ups stay open to the thread. An admin is someone listed
in DEEPTHREAD_ADMINS, or a workspace admin or owner as `users.info` reports them, counted only for
people of the bot's own workspace (or Enterprise Grid organization): in a Slack Connect channel,
another organization's admin is an ordinary user here.
"""

from __future__ import annotations

from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.services import Services
from jobs import RunState

__all__ = ["is_admin", "may_control", "only_who_may"]


def _of_this_organization(services: Services, user: dict[str, Any], team: str | None, enterprise: str | None) -> bool:
    """The person belongs to the workspace in question (the event's or the run's: each installation's
    in multi-workspace mode, else the one bot token's), or to its Enterprise Grid organization."""
    team = team or services.team_id
    if team and user.get("team_id") == team:
        return True
    organization = enterprise or services.enterprise_id
    theirs = (user.get("enterprise_user") or {}).get("enterprise_id")
    return bool(organization and theirs == organization)


async def is_admin(
    services: Services, client: AsyncWebClient, user: str, *, team: str | None = None, enterprise: str | None = None
) -> bool:
    """Listed in DEEPTHREAD_ADMINS, or an admin or owner of workspace `team` (users.info); `team`
    unset: the bot token's own workspace."""
    if user in services.admins:
        return True
    try:
        info = (await client.users_info(user=user))["user"]
    except SlackApiError:
        return False  # without users:read we cannot tell: only listed admins count
    if not _of_this_organization(services, info, team, enterprise):
        return False  # a Slack Connect guest: is_admin is about their own organization
    return bool(info.get("is_admin") or info.get("is_owner") or info.get("is_primary_owner"))


async def may_control(services: Services, client: AsyncWebClient, state: RunState, user: str) -> bool:
    """The person who asked, or an admin."""
    run = state.run
    return user == run.requester or await is_admin(services, client, user, team=run.team, enterprise=run.enterprise)


def only_who_may(state: RunState, what: str) -> str:
    """The one-line answer to anyone else: who may, and what they can do instead."""
    who = f"<@{state.run.requester}> (who asked)" if state.run.requester else "the person who asked"
    return f"Only {who} or a workspace admin can {what}. You can still reply in the thread with what to look into."
