"""What may be cited where: the one rule for results from the team's own Slack.

`DEEPTHREAD_WORKSPACE_SEARCH` says how far the team's Slack may be searched: `off` (not at all),
`public` (public channels only) or `dm` (public channels, and private channels and DMs too when
the report is in a DM with the requester). A report anywhere else than a DM with the requester
cites only public-channel results: a private channel's members are not the private result's
audience. The rule is held in code three times, each independent of the model: the search
never asks Slack for private results when they are not allowed (agent/tools/search_workspace.py),
no private source is registered then, and at report assembly a private source becomes no
footnote unless allowed (agent/report.py). A channel shared with another organization gets no
workspace search at all (jobs/records/models.py `Run.shared_audience`, decided by bot/slack/audience.py).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["WorkspaceSearchMode", "is_requester_dm", "private_sources_allowed"]

WorkspaceSearchMode = Literal["public", "dm", "off"]


def is_requester_dm(channel: str | None) -> bool:
    """A DM with the bot (Slack ids of direct messages start with D): its one person is the requester."""
    return bool(channel) and str(channel).startswith("D")


def private_sources_allowed(mode: str, channel: str | None) -> bool:
    """Whether a run in `channel` may search, register and cite private-channel and DM results."""
    return mode == "dm" and is_requester_dm(channel)
