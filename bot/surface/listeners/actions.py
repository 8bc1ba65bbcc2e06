"""Buttons on the progress message."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.publishing.render import GO_DEEPER_ACTION
from bot.services import Services
from bot.slack.tenancy import Tenant
from bot.surface.steering import go_deeper


def register(app: AsyncApp, services: Services) -> None:
    @app.action(GO_DEEPER_ACTION)
    async def on_go_deeper(ack: Any, body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]) -> None:
        await ack()
        channel = (body.get("channel") or {}).get("id")
        ts = (body.get("container") or {}).get("message_ts") or (body.get("message") or {}).get("ts")
        if not channel or not ts:
            return
        state = await services.runs.run_of_message(Tenant.of_context(context, body).team, channel, ts)
        if state is None:
            return
        action_ts = next((a.get("action_ts") for a in body.get("actions", [])), "") or body.get("trigger_id", "")
        await go_deeper(services, client, state, f"action:{ts}:{action_ts}", channel)
