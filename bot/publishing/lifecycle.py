"""A run's start in Slack: queue it, post its progress message and pinned report, hand it to
the publisher. Shared by the mention flow, thread continuations and the orphan sweep, so a
run is shown one way whoever starts it."""

from __future__ import annotations

import asyncio
import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.exceptions import NotInstalled
from bot.services import Services
from bot.slack.tenancy import Tenant, acting_for
from jobs import RunState

from .posting import OUTCOME_UNKNOWN, POST_ATTEMPTS, PostingLease, PostingLost, RunPoster
from .progress_render import render_progress
from .rendered import remember_rendered
from .report_render import render_report
from .stream_records import StreamRecords
from .stream_sync import open_stream

__all__ = ["launch_and_post", "pin", "post_messages"]

log = logging.getLogger(__name__)


async def launch_and_post(
    services: Services, client: AsyncWebClient, state: RunState, *, continuing: bool = False
) -> None:
    """Queue the run, then post its messages. A continuation posts a new progress message and
    keeps editing its parent's pinned report.

    Queued first: posts wait for a slot in the channel's rate-limit bucket (about one a second
    per channel), and a burst of mentions must not hold research back behind Slack. Whatever the
    run does before its messages exist is in run state; the publisher renders it once they do."""
    await services.runs.launch(state.run)
    # The same lease the orphan sweep takes (bot/publishing/orphans.py), renewed however long the posts
    # wait for their rate-limit slots: no other process posts this run's messages meanwhile.
    async with PostingLease(services.runs, state.run.id) as lease:
        if lease.held and await post_messages(services, client, state, continuing=continuing, lease=lease):
            log.info("run %s started in %s", state.run.id, state.run.channel)


async def post_messages(
    services: Services,
    client: AsyncWebClient,
    state: RunState,
    *,
    continuing: bool = False,
    lease: PostingLease | None = None,
) -> bool:
    """Post the progress message (and the pinned report for a thread's first run), each exactly
    once (posting.py: a message an earlier attempt posted is found and adopted), with the token of
    the run's installation; attach them to the run as soon as both are posted, then pin the report
    (a pin can wait a minute for its slot: the publisher and a stop need the run attached). If Slack
    refuses a post, the run is ended with the reason; returns whether posted. Lost answers that stay
    lost, or a lease lost to another process, leave the run to be posted later (by the orphan sweep,
    or that process)."""
    with acting_for(Tenant.of_run(state.run)):
        return await _post_messages(services, client, state, continuing=continuing, lease=lease)


async def _post_messages(
    services: Services, client: AsyncWebClient, state: RunState, *, continuing: bool, lease: PostingLease | None
) -> bool:
    run = state.run
    channel = run.channel or ""
    poster = RunPoster(services.redis, client, run, lease)
    progress, report = render_progress(state, services.stop_reaction), render_report(state)
    try:
        # DEEPTHREAD_PROGRESS=stream: progress is Slack's native stream where the workspace allows it.
        progress_ts = await open_stream(
            client, StreamRecords(services.redis), services.streams, state, services.stop_reaction
        )
        if progress_ts is None:
            progress_ts = await poster.post("progress", text=progress.text, blocks=progress.blocks)
        report_ts = run.report_message  # a continuation keeps editing its parent's pinned report
        new_report = report_ts is None  # pinned once attached
        if report_ts is None:
            report_ts = await poster.post("report", text=report.text, blocks=report.blocks, unfurl_links=False)
    except SlackApiError as exc:
        error = exc.response.get("error")
        log.error("could not post run %s messages in %s: %s", run.id, channel, error)
        await services.runs.fail(run.id, f"could not post in this channel ({error}); invite the bot and ask again")
        return False
    except PostingLost:
        log.warning("run %s: another process took over posting its messages", run.id)
        return False
    except NotInstalled as exc:
        await _uninstalled(services, run.id, channel, exc)
        return False
    # Attached as soon as both are posted, before the pin: pins.add is limited workspace-wide (~18 a
    # minute), and until then the publisher does not edit the messages and a stop on them finds no run.
    if lease is not None:
        await lease.posted()  # attach_messages ends the lease; nothing renews it meanwhile
    # From here the publisher keeps both messages in step with the run.
    await services.runs.attach_messages(run.id, progress=progress_ts, report=report_ts)
    # The publisher's digest cache (its own record): it need not edit what was just posted. A message
    # adopted from an earlier attempt shows that attempt's rendering: left unknown, so it is edited.
    await asyncio.to_thread(
        remember_rendered,
        services.redis,
        run.id,
        progress="" if "progress" in poster.adopted else progress.digest(),
        report="" if continuing or "report" in poster.adopted else report.digest(),
    )
    if new_report:
        try:
            await pin(client, channel, report_ts)
        except NotInstalled as exc:
            await _uninstalled(services, run.id, channel, exc)
            return False
    return True


async def _uninstalled(services: Services, run_id: str, channel: str, exc: NotInstalled) -> None:
    log.error("could not post run %s messages in %s: %s", run_id, channel, exc)
    await services.runs.fail(run_id, "the app is no longer installed in this workspace; install it again and ask")


async def pin(client: AsyncWebClient, channel: str, ts: str) -> None:
    """Pin the report. pins.add is idempotent (already_pinned is success), so a pin whose answer was
    lost is sent again: once its run is attached, nothing else would pin the report."""
    for attempt in range(1, POST_ATTEMPTS + 1):
        try:
            await client.pins_add(channel=channel, timestamp=ts)
            return
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error != "already_pinned":  # an unpinned report still works; say why in the log
                log.warning("could not pin the report in %s: %s", channel, error)
            return
        except OUTCOME_UNKNOWN as exc:
            if attempt == POST_ATTEMPTS:
                log.warning("could not pin the report in %s: no answer (%s)", channel, exc)
                return
            log.warning("pinning the report in %s: no answer (%s); trying again", channel, exc)
