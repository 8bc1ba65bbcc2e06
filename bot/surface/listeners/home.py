"""The Home tab: published when a person opens it (`app_home_opened`, tab `home`), and again after they
search the library from its box or stop one of their runs from it (`block_actions` from a `home` view).
Each publish is for the person who acted only (bot/desk/home.py)."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.desk.home import HOME_SEARCH_ACTION, HOME_STOP_ACTION, publish_home
from bot.desk.library import MAX_QUERY_CHARS
from bot.services import Services
from bot.slack.events import SLACK_USER_ID_PATTERN, HomeOpenedEvent, logged_id, malformed
from bot.slack.tenancy import Tenant
from bot.surface.steering import stop_run
from jobs import RunNotFound

log = logging.getLogger(__name__)


def register(app: AsyncApp, services: Services) -> None:
    @app.event("app_home_opened")
    async def on_home_opened(
        event: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]
    ) -> None:
        try:
            opened = HomeOpenedEvent.model_validate(event)
        except ValidationError as exc:
            log.warning(malformed("app_home_opened", exc, body))
            return
        if opened.tab != "home":
            return  # the Messages tab is a DM: its messages arrive as such
        tenant = Tenant.of_context(context, body)
        await publish_home(services, client, team=tenant.team, enterprise=tenant.enterprise, user=opened.user)

    @app.action(HOME_SEARCH_ACTION)
    async def on_home_search(ack: Any, body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]) -> None:
        await ack()
        user = _viewer(body)
        if user is None:
            return
        action: dict[str, Any] = next(iter(body.get("actions") or []), {})
        words = " ".join(str(action.get("value") or "").split())[:MAX_QUERY_CHARS]
        tenant = Tenant.of_context(context, body)
        await publish_home(
            services, client, team=tenant.team, enterprise=tenant.enterprise, user=user, search=words or None
        )

    @app.action(HOME_STOP_ACTION)
    async def on_home_stop(ack: Any, body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]) -> None:
        await ack()
        user = _viewer(body)
        if user is None:
            return
        action: dict[str, Any] = next(iter(body.get("actions") or []), {})
        run_id = str(action.get("value") or "")
        tenant = Tenant.of_context(context, body)
        try:
            state = await services.runs.get(run_id) if run_id else None
        except RunNotFound:
            state = None  # forgotten since the tab was drawn
        if state is not None and state.run.team == tenant.team and state.run.channel:
            await stop_run(services, client, state, user, state.run.channel)  # the requester's or an admin's
        await publish_home(services, client, team=tenant.team, enterprise=tenant.enterprise, user=user)


def _viewer(body: dict[str, Any]) -> str | None:
    """Who clicked on their Home tab: a Slack user id, or None (logged by its ids) for anything else."""
    person, team = body.get("user"), body.get("team")
    user = person.get("id") if isinstance(person, dict) else None
    if isinstance(user, str) and SLACK_USER_ID_PATTERN.fullmatch(user):
        return user
    team = team if isinstance(team, dict) else {}
    log.warning("ignored a Home tab action without a person's id (team %s)", logged_id(team.get("id")))
    return None
