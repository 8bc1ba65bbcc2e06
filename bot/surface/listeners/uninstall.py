"""The app uninstalled from a workspace (`app_uninstalled`), or its bot token revoked
(`tokens_revoked` naming the bot): the workspace's tokens are deleted and its active runs are
stopped, since nothing they do could be shown there any more; an uninstall then deletes every
other record of the workspace (bot/desk/retention.py). A deleted channel (`channel_deleted`,
`group_deleted` for a private one) deletes that channel's threads and records. A revoked user token changes
nothing (the app keeps none). Bolt delivers both events without authorizing them (the
installation may already be gone), with the workspace in its context.

An org-wide install (Enterprise Grid) uninstalled from the org stops the runs of every
workspace of the org; an uninstall from one workspace stops that workspace's runs only.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore

from bot.desk.retention import forget_channel, forget_workspace
from bot.services import Services
from bot.slack.tenancy import Tenant

__all__ = ["UNINSTALLED_REASON", "forget_installation", "register"]

log = logging.getLogger(__name__)

# Recorded on each run it stops (the run's record keeps it; Slack can no longer be told).
UNINSTALLED_REASON = "the app was uninstalled from this workspace"
REVOKED_REASON = "the app's access to this workspace was revoked"


def register(app: AsyncApp, services: Services, installations: AsyncInstallationStore | None) -> None:
    @app.event("app_uninstalled")
    async def on_uninstalled(body: dict[str, Any], context: dict[str, Any]) -> None:
        tenant = Tenant.of_context(context, body)
        await forget_installation(services, installations, tenant, UNINSTALLED_REASON)
        # A revoked token may come back with a reinstall; an uninstall is the workspace leaving.
        org_wide = tenant.enterprise if tenant.enterprise_install else None
        gone = await forget_workspace(services, tenant.team, enterprise=org_wide)
        log.warning("%s: uninstalled; deleted %d run(s) and %d record(s)", tenant.label, len(gone.runs), gone.keys)

    @app.event("channel_deleted")
    @app.event("group_deleted")
    async def on_channel_deleted(event: dict[str, Any], body: dict[str, Any], context: dict[str, Any]) -> None:
        if event.get("channel"):
            await forget_channel(services, Tenant.of_context(context, body).team, str(event["channel"]))

    @app.event("tokens_revoked")
    async def on_tokens_revoked(event: dict[str, Any], body: dict[str, Any], context: dict[str, Any]) -> None:
        if (event.get("tokens") or {}).get("bot"):
            await forget_installation(services, installations, Tenant.of_context(context, body), REVOKED_REASON)


async def forget_installation(
    services: Services, installations: AsyncInstallationStore | None, tenant: Tenant, reason: str
) -> list[str]:
    """Delete the installation's tokens, then stop its active runs; returns the runs stopped."""
    org_wide = tenant.enterprise if tenant.enterprise_install else None
    if installations is not None:  # multi-workspace mode; single-token mode has only SLACK_BOT_TOKEN
        # An org-wide install's record is the org's (no team), as it was saved.
        team = None if org_wide else tenant.team
        await installations.async_delete_all(enterprise_id=tenant.enterprise, team_id=team)
    stopped = await services.runs.stop_workspace(tenant.team, reason, enterprise=org_wide)
    log.warning("%s: %s; stopped %d active run(s)", tenant.label, reason, len(stopped))
    return stopped
