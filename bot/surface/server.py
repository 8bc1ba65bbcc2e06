"""HTTP mode: Slack posts events to /slack/events; the publisher runs alongside.

In multi-workspace mode the same server answers Slack's install flow: `GET /slack/install` and
`GET /slack/oauth_redirect` (Bolt's OAuth flow, oauth.py). In Socket Mode the events come over the
socket, so the server answers only the install flow. The health endpoints are added by the
command that serves it (bot/cli/health.py).
"""

from __future__ import annotations

import json
import logging
import math

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow

from bot.slack.oauth_state import STATE_SECONDS, InstallsBusy

from .install_limits import InstallLimiter

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
# Slack never sends more than a few kB per event; refuse anything absurd before parsing.
MAX_BODY_BYTES = 1_000_000


def web_app(app: AsyncApp, *, events_enabled: bool = True) -> web.Application:
    """The HTTP endpoints: events (unless they come over Socket Mode) and the install flow when
    the app has one."""

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
    if events_enabled:
        application.router.add_post(EVENTS_PATH, events)
    if app.oauth_flow is not None:
        _install_routes(application, app.oauth_flow)
    return application


def _install_routes(application: web.Application, flow: AsyncOAuthFlow) -> None:
    """Slack's install flow, as Bolt's own aiohttp server serves it; the install page is limited per
    client (install_limits.py) and by the flows in progress (bot/slack/oauth_state.py)."""
    limiter = InstallLimiter()

    async def install(request: web.Request) -> web.Response:
        wait = limiter.wait(request.remote or "unknown")
        if wait:
            return _busy(TOO_OFTEN, wait)
        try:
            return await to_aiohttp_response(await flow.handle_installation(await to_bolt_request(request)))
        except InstallsBusy:
            return _busy(TOO_MANY_INSTALLS, STATE_SECONDS)

    async def redirect(request: web.Request) -> web.Response:
        return await to_aiohttp_response(await flow.handle_callback(await to_bolt_request(request)))

    application.router.add_get(flow.install_path, install)
    application.router.add_get(flow.redirect_uri_path, redirect)


# What a refused visit to the install page is told (a person reads it in a browser).
TOO_OFTEN = "This install page was opened too often from your address. Wait a minute, then open it again."
TOO_MANY_INSTALLS = (
    "Too many installs of this app are in progress right now. Try again in a few minutes; if this goes on, "
    "tell whoever runs this Deepthread deployment."
)


def _busy(text: str, seconds: float) -> web.Response:
    return web.Response(status=429, text=text, headers={"Retry-After": str(math.ceil(seconds))})


def _is_malformed(raw: str) -> bool:
    try:
        body = json.loads(raw)
    except ValueError:
        return "payload=" not in raw and "command=" not in raw
    return not isinstance(body, dict) or "type" not in body
