"""Long-running processes: the Slack app with its publisher, and the RQ worker."""
from __future__ import annotations

import asyncio
import logging
import signal

from aiohttp import web
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from rq import Queue, Worker
from slack_sdk.errors import SlackApiError

import jobs
from jobs import RunStore
from jobs.keys import QUEUE

from .app import build_app, identify, slack_client
from .publisher import Publisher
from .server import web_app
from .services import Services
from .settings import Settings

log = logging.getLogger(__name__)


async def serve(settings: Settings) -> int:
    assert settings.redis_url
    redis = Redis.from_url(settings.redis_url)
    async_redis = AsyncRedis.from_url(settings.redis_url)
    client = slack_client(settings)
    try:
        identity = await identify(client)
    except SlackApiError as exc:
        log.error("Slack rejected SLACK_BOT_TOKEN (%s): use the bot token (xoxb-…) of an installed app",
                  exc.response.get("error"))
        return 2
    except Exception as exc:
        log.error("could not reach Slack at %s (%s): check SLACK_API_URL and the network",
                  settings.slack_api_url, type(exc).__name__)
        return 2
    store = RunStore(redis)
    services = Services(redis=redis, store=store, bot_user_id=identity.bot_user_id,
                        stop_reaction=settings.stop_reaction)
    app = build_app(settings, services, client, identity)
    publisher = asyncio.create_task(Publisher(redis, async_redis, store, client).run(), name="publisher")

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    app_token = settings.secret("slack_app_token")
    if app_token:
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        handler = AsyncSocketModeHandler(app, app_token)
        await handler.connect_async()
        log.info("deepthread is connected to Slack in Socket Mode")
        await stop.wait()
        await handler.close_async()
    else:
        runner = web.AppRunner(web_app(app), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "0.0.0.0", settings.port).start()
        log.info("deepthread is listening on port %s at /slack/events", settings.port)
        await stop.wait()
        await runner.cleanup()
    publisher.cancel()
    await asyncio.gather(publisher, return_exceptions=True)
    await async_redis.aclose()
    return 0


def work(settings: Settings, *, burst: bool = False) -> int:
    assert settings.redis_url
    redis = Redis.from_url(settings.redis_url)
    jobs.configure(settings.job_runtime())
    worker = Worker([Queue(QUEUE, connection=redis)], connection=redis)
    worker.work(burst=burst, with_scheduler=not burst, logging_level="INFO")
    return 0
