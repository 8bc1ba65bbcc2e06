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


def _of_this_organization(services: Services, user: dict[str, Any]) -> bool:
    """The person belongs to the installation's workspace, or to its Enterprise Grid organization."""
    if services.team_id and user.get("team_id") == services.team_id:
        return True
    enterprise = (user.get("enterprise_user") or {}).get("enterprise_id")
    return bool(services.enterprise_id and enterprise == services.enterprise_id)


async def is_admin(services: Services, client: AsyncWebClient, user: str) -> bool:
    """Listed in DEEPTHREAD_ADMINS, or an admin or owner of this workspace (users.info)."""
    if user in services.admins:
        return True
    try:
        info = (await client.users_info(user=user))["user"]
    except SlackApiError:
        return False  # without users:read we cannot tell: only listed admins count
    if not _of_this_organization(services, info):
        return False  # a Slack Connect guest: is_admin is about their own organization
    return bool(info.get("is_admin") or info.get("is_owner") or info.get("is_primary_owner"))


async def may_control(services: Services, client: AsyncWebClient, state: RunState, user: str) -> bool:
    """The person who asked, or an admin."""
    return user == state.run.requester or await is_admin(services, client, user)


def only_who_may(state: RunState, what: str) -> str:
    """The one-line answer to anyone else: who may, and what they can do instead."""
    who = f"<@{state.run.requester}> (who asked)" if state.run.requester else "the person who asked"
    return f"Only {who} or a workspace admin can {what}. You can still reply in the thread with what to look into."
