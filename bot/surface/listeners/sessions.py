"""The stop button of a thread's agent session (agent_session_stopped): the same stop as the reaction.

Slack shows the button while the session is `processing` and sends this event when it is clicked,
to whoever clicks it; who may stop the run, the bounded finalization and the "stopped by" line
are the stop reaction's (bot/surface/steering.py). Slack does not move the session itself: the
publisher moves it on once the run has ended (bot/publishing/agent_sessions.py). A click by
someone who may not stop the run is answered privately and the run goes on.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.services import EVENT_DEDUPE_TTL_SECONDS, Services
from bot.slack.events import SessionStoppedEvent, malformed
from bot.slack.tenancy import Tenant
from bot.surface.steering import stop_run

log = logging.getLogger(__name__)


def register(app: AsyncApp, services: Services) -> None:
    @app.event("agent_session_stopped")
    async def on_session_stopped(
        event: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]
    ) -> None:
        await handle_session_stopped(services, client, event, body, Tenant.of_context(context, body).team)


async def handle_session_stopped(
    services: Services, client: AsyncWebClient, event: dict[str, Any], body: dict[str, Any], team: str | None
) -> None:
    try:
        stopped = SessionStoppedEvent.model_validate(event)
    except ValidationError as exc:
        log.warning(malformed("agent_session_stopped", exc, body))
        return
    event_id = body.get("event_id") or f"{stopped.channel}:{stopped.thread_ts}:{stopped.event_ts}"
    if not await services.runs.claim_event(team, f"event:{event_id}", EVENT_DEDUPE_TTL_SECONDS):
        return  # Slack's retry of the same click
    state = await services.runs.latest_in_thread(team, stopped.channel, stopped.thread_ts)
    if state is None:
        return  # not a thread of ours (in this workspace)
    log.info("run %s: the session's stop button was clicked by %s", state.run.id, stopped.user)
    await stop_run(services, client, state, stopped.user, stopped.channel)
