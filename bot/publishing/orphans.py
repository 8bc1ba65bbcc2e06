"""Runs nobody showed in Slack: serve died after recording (and perhaps launching) a run but
before posting its messages. Serve looks for them periodically and posts them as the mention
flow would have (progress, then the pinned report); if Slack refuses, the run is ended with
the reason. Launching a run that never was is the workers' part (jobs/upkeep/recovery.py).
"""

from __future__ import annotations

import logging

from slack_sdk.web.async_client import AsyncWebClient

from bot.services import Services

from .lifecycle import post_messages
from .posting import PostingLease

__all__ = ["ORPHAN_CHECK_SECONDS", "UNPOSTED_GRACE_SECONDS", "post_orphans"]

log = logging.getLogger(__name__)

# The mention flow claims the posting lease milliseconds after recording the run and renews it while
# its posts wait for their rate-limit slots, so a run still unposted after this long whose lease is
# free (claimed below) was left by a process that died; the lease decides, the grace only skips
# runs whose first claim is still on its way.
UNPOSTED_GRACE_SECONDS = 30
# How often serve looks (one sorted-set read when there is nothing to do).
ORPHAN_CHECK_SECONDS = 15


async def post_orphans(
    services: Services, client: AsyncWebClient, older_than_seconds: float = UNPOSTED_GRACE_SECONDS
) -> list[str]:
    """Post every orphaned run this process claims; returns the ids it posted or ended."""
    handled = []
    for state in await services.runs.unposted(older_than_seconds):
        async with PostingLease(services.runs, state.run.id) as lease:
            if not lease.held:
                continue
            if await post_messages(services, client, state, lease=lease):
                log.warning("run %s was never shown in Slack (its serve process died); posted it now", state.run.id)
            handled.append(state.run.id)
    return handled
