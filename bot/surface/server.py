"""HTTP mode: Slack posts events to /slack/events; the publisher runs alongside (and the health
endpoints, added by the command that serves it: bot/cli/health.py)."""

from __future__ import annotations

import json
import logging

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
# Slack never sends more than a few kB per event; refuse anything absurd before parsing.
MAX_BODY_BYTES = 1_000_000


def web_app(app: AsyncApp) -> web.Application:
    async def events(request: web.Request) -> web.Response:
        try:
            bolt_request = await to_bolt_request(request)
        except Exception:
            return web.json_response({"error": "unreadable request body"}, status=400)
        try:
            bolt_response = await app.async_dispatch(bolt_request)
        except Exception as exc:  # a signed but malformed body makes Bolt raise
            log.warning("rejected a malformed Slack request: %s", type(exc).__name__)
            return web.json_response({"error": "malformed Slack request"}, status=400)
        if bolt_response.status >= 500 and _is_malformed(bolt_request.raw_body):
            return web.json_response({"error": "malformed Slack request"}, status=400)
        return await to_aiohttp_response(bolt_response)

    application = web.Application(client_max_size=MAX_BODY_BYTES)
    application.router.add_post(EVENTS_PATH, events)  # /healthz and /readyz: bot/cli/health.py
    return application


def _is_malformed(raw: str) -> bool:
    try:
        body = json.loads(raw)
    except ValueError:
        return "payload=" not in raw and "command=" not in raw
    return not isinstance(body, dict) or "type" not in body
