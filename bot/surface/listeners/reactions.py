"""The stop reaction on a run's progress or report message; every other reaction is ignored."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.services import Services
from bot.slack.events import ReactionEvent
from bot.slack.tenancy import Tenant
from bot.surface.steering import stop_run


def register(app: AsyncApp, services: Services) -> None:
    @app.event("reaction_added")
    async def on_reaction(
        event: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]
    ) -> None:
        try:
            reaction = ReactionEvent.model_validate(event)
        except ValidationError:
            return
        bot_user = context.get("bot_user_id") or services.bot_user_id
        if reaction.reaction != services.stop_reaction or reaction.user == bot_user:
            return
        team = Tenant.of_context(context, body).team  # a message of this workspace's runs, none other
        state = await services.runs.run_of_message(team, reaction.item.channel, reaction.item.ts)
        if state is not None:
            await stop_run(services, client, state, reaction.user, reaction.item.channel)
