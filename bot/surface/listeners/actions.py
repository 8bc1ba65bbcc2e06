"""Buttons on the progress message."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.desk.export import export_report
from bot.publishing.export_button import EXPORT_ACTION
from bot.publishing.plan_render import APPROVE_PLAN_ACTION, CHANGE_PLAN_ACTION
from bot.publishing.progress_render import GO_DEEPER_ACTION
from bot.services import Services
from bot.slack.replies import reply
from bot.slack.tenancy import Tenant
from bot.surface.steering import PLAN_CHANGE_HOW, approve_plan, go_deeper


def register(app: AsyncApp, services: Services) -> None:
    @app.action(GO_DEEPER_ACTION)
    async def on_go_deeper(ack: Any, body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]) -> None:
        await ack()
        found = await run_of(services, body, context)
        if found is None:
            return
        state, channel = found
        ts = (body.get("container") or {}).get("message_ts") or (body.get("message") or {}).get("ts")
        action_ts = next((a.get("action_ts") for a in body.get("actions", [])), "") or body.get("trigger_id", "")
        user = str((body.get("user") or {}).get("id") or "")
        await go_deeper(services, client, state, f"action:{ts}:{action_ts}", channel, user)

    @app.action(APPROVE_PLAN_ACTION)
    async def on_approve_plan(ack: Any, body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]) -> None:
        await ack()
        found = await run_of(services, body, context)
        if found is not None:
            state, channel = found
            await approve_plan(services, client, state, (body.get("user") or {}).get("id", ""), channel)

    @app.action(EXPORT_ACTION)
    async def on_export(ack: Any, body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]) -> None:
        await ack()
        found = await run_of(services, body, context)
        if found is None:
            return
        state, _ = found
        run = state.run
        latest = await services.runs.latest_in_thread(run.team, run.channel or "", run.thread_ts or "") or state
        action: dict[str, Any] = next(iter(body.get("actions") or []), {})
        pressed = EXPORT_ACTION.match(str(action.get("action_id") or ""))
        fmt = pressed.group(1) if pressed else "md"
        await export_report(client, latest, fmt, str((body.get("user") or {}).get("id") or ""))

    @app.action(CHANGE_PLAN_ACTION)
    async def on_change_plan(ack: Any, body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]) -> None:
        await ack()
        found = await run_of(services, body, context)
        if found is not None:
            state, channel = found
            await reply(client, channel, state.run.thread_ts, PLAN_CHANGE_HOW)


async def run_of(services: Services, body: dict[str, Any], context: dict[str, Any]) -> tuple[Any, str] | None:
    """The run of this workspace whose progress message carries the pressed button, and its channel."""
    channel = (body.get("channel") or {}).get("id")
    ts = (body.get("container") or {}).get("message_ts") or (body.get("message") or {}).get("ts")
    if not channel or not ts:
        return None
    state = await services.runs.run_of_message(Tenant.of_context(context, body).team, channel, ts)
    return (state, channel) if state is not None else None
