"""Who can read a conversation: whether people of another organization are in it (Slack Connect).

A channel shared with another organization is an audience outside this workspace: a report there
cites no result from the team's own Slack, public or private (agent/visibility.py). Slack says so in
conversations.info (`is_ext_shared`, `is_pending_ext_shared` while an invitation is open, and the
other teams in `shared_team_ids` / `connected_team_ids`); a channel shared only among the
workspaces of one Enterprise org (`is_org_shared`) stays inside the organization. When Slack does not
answer, the conversation counts as shared: a report then only loses workspace results.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.limits import AUDIENCE_LOOKUP_SECONDS

__all__ = ["is_shared_externally", "shared_externally"]

log = logging.getLogger(__name__)

OTHER_TEAM_FIELDS = ("shared_team_ids", "connected_team_ids", "pending_connected_team_ids")


def is_shared_externally(info: dict[str, Any], team: str | None, enterprise: str | None = None) -> bool:
    """conversations.info's `channel`: shared with, or being shared with, another organization."""
    if info.get("is_ext_shared") or info.get("is_pending_ext_shared"):
        return True
    if info.get("is_org_shared") and enterprise:  # the workspaces of our own org: still inside
        return False
    others = {str(t) for name in OTHER_TEAM_FIELDS for t in info.get(name) or [] if t}
    return bool(others - {team or ""})


async def shared_externally(client: AsyncWebClient, channel: str, team: str | None, enterprise: str | None) -> bool:
    """Asks Slack; when it does not answer in time, counts the conversation as shared (fail closed)."""
    try:
        answer = await asyncio.wait_for(client.conversations_info(channel=channel), AUDIENCE_LOOKUP_SECONDS)
        info = answer["channel"]
    except (SlackApiError, TimeoutError, KeyError, TypeError) as exc:
        log.info("conversation %s counts as shared outside the workspace: %s", channel, exc)
        return True
    return is_shared_externally(info if isinstance(info, dict) else {}, team, enterprise)
