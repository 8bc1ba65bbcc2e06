"""Long-running processes: the Slack app with its publisher, and the RQ worker."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from rq import Queue
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

import jobs
from bot.desk.recheck import RECHECK_CHECK_SECONDS, post_recheck_news
from bot.publishing.orphans import ORPHAN_CHECK_SECONDS, post_orphans
from bot.publishing.publisher import Publisher
from bot.services import Services
from bot.settings import Settings, StreamConfig
from bot.surface.app import build_app, identify, slack_client
from bot.surface.server import web_app
from jobs import AsyncRuns, Runs, RunStore, spend
from jobs.connection import connect, connect_async
from jobs.keys import QUEUE
from jobs.worker import SWEEP_INTERVAL_SECONDS, WORKER_TTL_SECONDS, DeepthreadWorker

from .runtime import job_runtime

log = logging.getLogger(__name__)

# How often serve looks for stops whose grace ran out (one sorted-set read; idle workers check too).
HARD_STOP_CHECK_SECONDS = 2.0
# How often serve ends runs whose plan expired unapproved: the note lands within seconds of the deadline.
PLAN_CHECK_SECONDS = 2.0


async def _every(seconds: float, check: Callable[[], Awaitable[object]], stop: asyncio.Event, what: str) -> None:
    """Run `check` now and then every `seconds` until `stop`; a failed round is logged and retried."""
    while not stop.is_set():
        try:
            await check()
        except Exception:  # Redis away or Slack trouble: what was recorded stays recorded; retry
            log.exception("%s failed", what)
        try:
            await asyncio.wait_for(stop.wait(), seconds)
        except TimeoutError:
            pass


async def serve(settings: Settings) -> int:
    assert settings.redis_url
    redis = connect(settings.redis_url)
    async_redis = connect_async(settings.redis_url)
    client = slack_client(settings)
    try:
        identity = await identify(client)
    except SlackApiError as exc:
        log.error(
            "Slack rejected SLACK_BOT_TOKEN (%s): use the bot token (xoxb-…) of an installed app",
            exc.response.get("error"),
        )
        return 2
    except Exception as exc:
        log.error(
            "could not reach Slack at %s (%s): check SLACK_API_URL and the network",
            settings.slack_api_url,
            type(exc).__name__,
        )
        return 2
    store = RunStore(redis)
    spend.configure(settings.budget_defaults())
    services = Services(
        redis=redis,
        store=store,
        bot_user_id=identity.bot_user_id,
        stop_reaction=settings.stop_reaction,
        admins=settings.id_set(settings.admins),
        channels=settings.id_set(settings.channels),
        streams=StreamConfig(
            mode=settings.progress, max_seconds=settings.stream_max_seconds, max_tasks=settings.stream_max_tasks
        ),
        workspace_search=settings.workspace_search,
    )
    services.runs = AsyncRuns(Runs(store, hard_stop_seconds=settings.hard_stop_seconds))
    app = build_app(settings, services, client, identity)
    stop = asyncio.Event()
    publisher = asyncio.create_task(
        Publisher(
            redis, async_redis, store, client, stop_reaction=settings.stop_reaction, streams=services.streams
        ).run(stop),
        name="publisher",
    )
    # Work recorded in Redis by a process that may have died: forced stops, runs never posted.
    hard_stops = asyncio.create_task(
        _every(HARD_STOP_CHECK_SECONDS, services.runs.force_due_stops, stop, "hard-stop check"), name="hard-stops"
    )
    # Plan first: plans nobody approved in time end their runs (the deadline is in Redis, set by the worker).
    plans = asyncio.create_task(
        _every(PLAN_CHECK_SECONDS, services.runs.expire_plans, stop, "plan expiry check"), name="plans"
    )
    orphans = asyncio.create_task(
        _every(ORPHAN_CHECK_SECONDS, lambda: post_orphans(services, client), stop, "orphan check"), name="orphans"
    )
    # Re-checks started by workers (and their digests) are shown within seconds, not after the orphan grace.
    rechecks = asyncio.create_task(
        _every(RECHECK_CHECK_SECONDS, lambda: post_recheck_news(services, client), stop, "re-check posts"),
        name="rechecks",
    )

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    app_token = settings.secret("slack_app_token")
    code = 0
    if app_token:
        code = await _socket_mode(app, client, app_token, stop)
    else:
        runner = web.AppRunner(web_app(app), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "0.0.0.0", settings.port).start()
        log.info("deepthread is listening on port %s at /slack/events", settings.port)
        await stop.wait()
        await runner.cleanup()
    stop.set()
    await asyncio.gather(publisher, hard_stops, plans, orphans, rechecks, return_exceptions=True)
    await async_redis.aclose()
    return code


# Slack errors that mean the app-level token will never work: stop with one clear line.
APP_TOKEN_REJECTED = {
    "invalid_auth",
    "not_authed",
    "not_allowed_token_type",
    "token_revoked",
    "token_expired",
    "account_inactive",
}


async def _socket_mode(app: Any, client: AsyncWebClient, app_token: str, stop: asyncio.Event) -> int:
    """Serve over Socket Mode until `stop`; 2 when Slack rejects the app-level token."""
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    # Prove the token once, as identify() does for the bot token: the socket client itself
    # would retry a rejected token forever.
    try:
        first_url = (await client.apps_connections_open(app_token=app_token))["url"]
    except SlackApiError as exc:
        error = exc.response.get("error")
        if error in APP_TOKEN_REJECTED:
            log.error(
                "Slack rejected SLACK_APP_TOKEN (%s): use an app-level token (xapp-…) with connections:write", error
            )
            return 2
        first_url = None  # Slack is having trouble: the client keeps retrying
    handler = AsyncSocketModeHandler(app, app_token)
    if first_url:
        handler.client.wss_uri = first_url  # a connection URL works once: do not waste this one
    connecting = asyncio.create_task(handler.connect_async())
    stopping = asyncio.create_task(stop.wait())
    # Connecting may retry for a long time; a stop signal must still end the process.
    await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not stop.is_set():
        log.info("deepthread is connected to Slack in Socket Mode")
        await stop.wait()
    connecting.cancel()
    stopping.cancel()
    await asyncio.gather(connecting, stopping, return_exceptions=True)
    await handler.close_async()
    return 0


def work(settings: Settings, *, burst: bool = False) -> int:
    assert settings.redis_url
    redis = connect(settings.redis_url)
    jobs.configure(job_runtime(settings))
    spend.configure(settings.budget_defaults())
    worker = DeepthreadWorker(
        [Queue(QUEUE, connection=redis)],
        connection=redis,
        worker_ttl=WORKER_TTL_SECONDS,
        maintenance_interval=SWEEP_INTERVAL_SECONDS,
    )
    worker.work(burst=burst, with_scheduler=not burst, logging_level="INFO")
    return 0
