"""Runs nobody showed in Slack: serve died after recording (and perhaps launching) a run but
before posting its messages. Serve looks for them periodically and posts them as the mention
flow would have (progress, then the pinned report); if Slack refuses, the run is ended with
the reason. Launching a run that never was is the workers' part (jobs/recovery.py).
"""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from jobs import RunState

from .listeners.mentions import pin
from .render import render_progress, render_report
from .services import Services

__all__ = ["ORPHAN_CHECK_SECONDS", "UNPOSTED_GRACE_SECONDS", "post_orphans"]

log = logging.getLogger(__name__)

# The mention flow posts right after launching, but in a burst its posts wait for the channel's
# rate-limit slot (about one a second): only a run unposted for longer than this is an orphan.
UNPOSTED_GRACE_SECONDS = 120
# How often serve looks (one sorted-set read when there is nothing to do).
ORPHAN_CHECK_SECONDS = 15


async def post_orphans(
    services: Services, client: AsyncWebClient, older_than_seconds: float = UNPOSTED_GRACE_SECONDS
) -> list[str]:
    """Post every orphaned run this process claims; returns the ids it posted or ended."""
    handled = []
    for state in await services.runs.unposted(older_than_seconds):
        if await services.runs.claim_posting(state.run.id):
            await _post(services, client, state)
            handled.append(state.run.id)
    return handled


async def _post(services: Services, client: AsyncWebClient, state: RunState) -> None:
    run = state.run
    channel = run.channel or ""
    progress, report = render_progress(state, services.stop_reaction), render_report(state)
    try:
        posted = await client.chat_postMessage(
            channel=channel, thread_ts=run.thread_ts, text=progress.text, blocks=progress.blocks
        )
        report_ts = run.report_message  # a continuation keeps editing its parent's pinned report
        if report_ts is None:
            pinned = await client.chat_postMessage(
                channel=channel, thread_ts=run.thread_ts, text=report.text, blocks=report.blocks, unfurl_links=False
            )
            report_ts = pinned["ts"]
            await pin(client, channel, report_ts)
    except SlackApiError as exc:
        error = exc.response.get("error")
        log.error("could not post orphaned run %s in %s: %s", run.id, channel, error)
        await services.runs.fail(run.id, f"could not post in this channel ({error}); invite the bot and ask again")
        return
    # From here the publisher keeps both messages in step with the run, as for any run.
    await services.runs.attach_messages(run.id, progress=posted["ts"], report=report_ts)
    log.warning("run %s was never shown in Slack (its serve process died); posted it now", run.id)
