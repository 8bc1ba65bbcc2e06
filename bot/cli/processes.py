"""Long-running processes: the Slack app with its publisher, and the RQ worker."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from rq import Queue
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

import jobs
from agent import utcnow
from bot.desk.recheck import RECHECK_CHECK_SECONDS, post_recheck_news
from bot.desk.retention import retention
from bot.exceptions import UNVERIFIED_HTTP_MODE
from bot.publishing.agent_sessions import SessionConfig
from bot.publishing.orphans import ORPHAN_CHECK_SECONDS, post_orphans
from bot.publishing.publisher import Publisher
from bot.services import Services
from bot.settings import Settings, StreamConfig
from bot.slack.thread_log import ThreadLog
from bot.surface.app import build_app, identify, slack_client
from bot.surface.inflight import InFlight
from bot.surface.oauth import INSTALL_PATH, installation_store, oauth_flow
from bot.surface.server import web_app
from jobs import AsyncRuns, Runs, RunStore, keys
from jobs.budgets import spend
from jobs.budgets.spend import Spend
from jobs.keyspace.connection import connect, connect_async
from jobs.process.background import Stop
from jobs.process.loop_lag import watch_lag
from jobs.records.library import Library
from jobs.upkeep.recovery import sweep
from jobs.workers.worker import SWEEP_INTERVAL_SECONDS, WORKER_TTL_SECONDS, DeepthreadWorker

from .health import ServeHealth, WorkerHealth
from .observability import enable_metrics
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


def retention_round(redis: Any, settings: Settings) -> None:
    """The retention round, when it is this process's turn (serve's and every worker's maintenance ask),
    and on that turn the library's sweep of reports whose run expired without a forget."""
    if retention(redis).due_round(utcnow(), settings.retention_days) is not None:
        Library(redis).sweep()


async def serve(settings: Settings) -> int:
    assert settings.redis_url
    if not settings.socket_mode and settings.secret("slack_signing_secret") is None:
        log.error(UNVERIFIED_HTTP_MODE)  # before anything listens or reaches Slack
        return 2
    redis = connect(settings.redis_url)
    enable_metrics(settings, redis)
    async_redis = connect_async(settings.redis_url)
    installations = oauth = identity = None
    if settings.multi_workspace:
        # Each workspace installs through /slack/install; every call uses its installation's token.
        installations = installation_store(settings, async_redis)
        client = slack_client(settings, tokens=installations)
        oauth = oauth_flow(settings, installations, async_redis, Spend(redis))
        log.info(
            "multi-workspace mode: %d workspace(s) installed; install more at %s",
            len(await installations.installed()),
            INSTALL_PATH,
        )
    else:
        client = slack_client(settings)
        identity = await _identify(settings, client)
        if identity is None:
            return 2
    store = RunStore(redis)
    spend.configure(settings.budget_defaults())
    services = Services(
        redis=redis,
        store=store,
        # Per installation in multi-workspace mode (read from each event's context), so None here.
        bot_user_id=identity.bot_user_id if identity else None,
        team_id=identity.team_id if identity else None,
        enterprise_id=identity.enterprise_id if identity else None,
        dms=settings.dms == "on",
        stop_reaction=settings.stop_reaction,
        admins=settings.id_set(settings.admins),
        channels=settings.id_set(settings.channels),
        streams=StreamConfig(
            mode=settings.progress, max_seconds=settings.stream_max_seconds, max_tasks=settings.stream_max_tasks
        ),
        workspace_search=settings.workspace_search,
        thread_log=ThreadLog(redis, int(settings.retention_days * 86_400))
        if settings.slack_distributed == "on"
        else None,
        claim_check=settings.claim_check == "on",
    )
    services.runs = AsyncRuns(Runs(store, hard_stop_seconds=settings.hard_stop_seconds))
    app = build_app(settings, services, client, identity, oauth=oauth, installations=installations)
    inflight = InFlight()  # the event handlers under way, which a shutdown lets finish
    inflight.install(asyncio.get_running_loop())
    app.use(inflight.middleware)
    stop = asyncio.Event()  # SIGTERM: stop taking events
    done = asyncio.Event()  # then, once in-flight events are handled: stop the background work
    publisher = Publisher(
        redis,
        async_redis,
        store,
        client,
        stop_reaction=settings.stop_reaction,
        streams=services.streams,
        sessions=SessionConfig(idle_seconds=settings.session_idle_hours * 3600),
        report_mode=settings.report,
    )
    background = {
        "publisher": asyncio.create_task(publisher.run(done), name="publisher"),
        # Work recorded in Redis by a process that may have died: forced stops, runs never posted.
        "hard-stops": asyncio.create_task(
            _every(HARD_STOP_CHECK_SECONDS, services.runs.force_due_stops, done, "hard-stop check"), name="hard-stops"
        ),
        # Plan first: plans nobody approved in time end their runs (the deadline is in Redis, set by the worker).
        "plans": asyncio.create_task(
            _every(PLAN_CHECK_SECONDS, services.runs.expire_plans, done, "plan expiry check"), name="plans"
        ),
        "orphans": asyncio.create_task(
            _every(ORPHAN_CHECK_SECONDS, lambda: post_orphans(services, client), done, "orphan check"), name="orphans"
        ),
        # Serve sweeps for runs whose worker died too: RQ runs an idle worker's maintenance only, so a
        # fleet whose every worker is busy would otherwise leave a dead worker's run waiting.
        "recovery": asyncio.create_task(
            _every(SWEEP_INTERVAL_SECONDS, lambda: asyncio.to_thread(sweep, redis), done, "recovery sweep"),
            name="recovery",
        ),
        # Retention: runs older than DEEPTHREAD_RETENTION_DAYS deleted (a lease gives one process the round).
        "retention": asyncio.create_task(
            _every(
                SWEEP_INTERVAL_SECONDS, lambda: asyncio.to_thread(retention_round, redis, settings), done, "retention"
            ),
            name="retention",
        ),
        # How late serve's loop wakes a timer: every workspace's events and the publisher share it.
        "loop-lag": asyncio.create_task(_lag_until(done), name="loop-lag"),
        # Re-checks started by workers (and their digests) are shown within seconds, not after the orphan grace.
        "rechecks": asyncio.create_task(
            _every(RECHECK_CHECK_SECONDS, lambda: post_recheck_news(services, client), done, "re-check posts"),
            name="rechecks",
        ),
    }

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    app_token = settings.secret("slack_app_token")
    socket = _SocketMode(app, client, app_token) if settings.socket_mode and app_token else None
    health = ServeHealth(async_redis, publisher, background, socket.problem if socket else _listening)
    code = 0
    if socket is not None:
        # Socket Mode carries the events, so this server answers the health endpoints (and the install
        # flow, in multi-workspace mode) only.
        application = web_app(app, events_enabled=False)
        health.add_routes(application)
        runner = web.AppRunner(application, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        await web.TCPSite(runner, "0.0.0.0", settings.port).start()
        _log_listening(app, settings, events=False)
        code = await socket.run(stop)
        health.draining = True
    else:
        application = web_app(app)
        health.add_routes(application)
        # In-flight requests get this long at shutdown; Bolt acks at once and handles events in tasks of
        # their own, which are drained below.
        runner = web.AppRunner(application, access_log=None, shutdown_timeout=HTTP_SHUTDOWN_SECONDS)
        await runner.setup()
        await web.TCPSite(runner, "0.0.0.0", settings.port).start()
        _log_listening(app, settings, events=True)
        await stop.wait()
        health.draining = True
    cut_short = await inflight.drain(DRAIN_SECONDS)
    if cut_short:
        log.warning(
            "shutting down: %d event handler(s) still running after %.0f s were cut short; what they had "
            "recorded is picked up by another process",
            cut_short,
            DRAIN_SECONDS,
        )
    await runner.cleanup()
    done.set()
    _, late = await asyncio.wait(background.values(), timeout=BACKGROUND_STOP_SECONDS)
    for task in late:  # a check still at work (a long orphan post): its state is in Redis for the next process
        task.cancel()
    await asyncio.gather(*background.values(), return_exceptions=True)
    await async_redis.aclose()
    services.reader.close()
    log.info("deepthread serve stopped")
    return code


# SIGTERM to exit within a platform's usual grace (30 s): events under way get DRAIN_SECONDS to finish
# their posts (what is cut short is handed back: its posting lease is released, and the orphan sweep
# of another replica posts it, finding what was already posted), then the publisher flushes its syncs
# (publisher.FLUSH_SECONDS) and the background checks stop.
DRAIN_SECONDS = 15.0
HTTP_SHUTDOWN_SECONDS = 2.0
BACKGROUND_STOP_SECONDS = 8.0


async def _lag_until(done: asyncio.Event) -> None:
    """deepthread_event_loop_lag_seconds for serve's loop, until the background work stops."""
    stop = Stop()
    watching = asyncio.create_task(watch_lag(stop), name="loop-lag-timer")
    await done.wait()
    stop.set()
    await watching


async def _listening() -> str | None:
    return None  # HTTP mode: Slack reaches us as long as this process answers


async def _identify(settings: Settings, client: AsyncWebClient) -> AuthorizeResult | None:
    """Single-token mode: who SLACK_BOT_TOKEN is (None, said in one line, when it cannot work)."""
    try:
        return await identify(client)
    except SlackApiError as exc:
        log.error(
            "Slack rejected SLACK_BOT_TOKEN (%s): use the bot token (xoxb-…) of an installed app",
            exc.response.get("error"),
        )
    except Exception as exc:
        log.error(
            "could not reach Slack at %s (%s): check SLACK_API_URL and the network",
            settings.slack_api_url,
            type(exc).__name__,
        )
    return None


def _log_listening(app: Any, settings: Settings, *, events: bool) -> None:
    paths = ["/slack/events"] if events else []
    if app.oauth_flow is not None:
        paths += [app.oauth_flow.install_path, app.oauth_flow.redirect_uri_path]
    paths += ["/healthz", "/readyz"]
    log.info("deepthread is listening on port %s at %s", settings.port, ", ".join(paths))


# Slack errors that mean the app-level token will never work: stop with one clear line.
APP_TOKEN_REJECTED = {
    "invalid_auth",
    "not_authed",
    "not_allowed_token_type",
    "token_revoked",
    "token_expired",
    "account_inactive",
}


class _SocketMode:
    """Serving over Socket Mode: connect, report whether connected (for /readyz), close at shutdown."""

    def __init__(self, app: Any, client: AsyncWebClient, app_token: str) -> None:
        self.app = app
        self.client = client
        self.app_token = app_token
        self.handler: Any = None

    async def problem(self) -> str | None:
        if self.handler is None:
            return "connecting"
        try:
            connected = await asyncio.wait_for(self.handler.client.is_connected(), 2.0)
        except Exception as exc:
            return f"unknown ({type(exc).__name__})"
        return None if connected else "not connected (reconnecting)"

    async def run(self, stop: asyncio.Event) -> int:
        """Serve until `stop`; 2 when Slack rejects the app-level token."""
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        # Prove the token once, as identify() does for the bot token: the socket client itself
        # would retry a rejected token forever.
        try:
            first_url = (await self.client.apps_connections_open(app_token=self.app_token))["url"]
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error in APP_TOKEN_REJECTED:
                log.error(
                    "Slack rejected SLACK_APP_TOKEN (%s): use an app-level token (xapp-…) with connections:write",
                    error,
                )
                return 2
            first_url = None  # Slack is having trouble: the client keeps retrying
        handler = AsyncSocketModeHandler(self.app, self.app_token)
        if first_url:
            handler.client.wss_uri = first_url  # a connection URL works once: do not waste this one
        self.handler = handler
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
        # Closing the connection stops new events; Slack sends them to the app's other connections.
        await handler.close_async()
        return 0


def work(settings: Settings, *, burst: bool = False) -> int:
    assert settings.redis_url
    redis = connect(settings.redis_url)
    enable_metrics(settings, redis)
    jobs.configure(job_runtime(settings))
    spend.configure(settings.budget_defaults())
    queues = [Queue(keys.QUEUE, connection=redis)]
    common: dict[str, Any] = {
        "connection": redis,
        "worker_ttl": WORKER_TTL_SECONDS,
        "maintenance_interval": SWEEP_INTERVAL_SECONDS,
    }
    worker: Any
    if settings.worker_runs > 1:
        from jobs.workers.concurrent_worker import ConcurrentWorker

        worker = ConcurrentWorker(queues, runs=settings.worker_runs, **common)
    else:
        worker = DeepthreadWorker(queues, **common)
    worker.maintenance.append(lambda: retention_round(redis, settings))
    if settings.health_port:
        health = WorkerHealth(worker, settings.redis_url, settings.health_port, settings.metrics_host).start()
        worker.on_shutdown.append(lambda: setattr(health, "stopping", True))
        worker.in_horse.append(health.close)
    worker.work(burst=burst, with_scheduler=not burst, logging_level="INFO")
    return 0
