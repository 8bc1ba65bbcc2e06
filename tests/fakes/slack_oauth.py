"""Many workspaces and Slack's OAuth install flow, for the fake Slack (a mixin of FakeSlack).

The fake starts as one workspace (TEAM_ID) whose bot accepts any `xoxb-` token, as before. A test
that needs more adds workspaces (`add_workspace`, each with its own bot user, bot id and
channels) and configures the app's OAuth credentials (`configure_oauth`); from then on only
tokens Slack issued are accepted, as on Slack:

- `GET /oauth/v2/authorize` is the page a person approves the install on. It checks the app's
  `client_id`, the `redirect_uri` (when one is sent it must be the app's Redirect URL) and
  `scope`, and sends the browser back to the Redirect URL with a one-time `code` (valid ten
  minutes) and the `state` it was given, or with `error=access_denied` when the person cancels
  (`deny_next_install`). The workspace is the one named by `team`, else `install_as(...)`'s.
- `oauth.v2.access` exchanges the code: the client's id and secret by HTTP Basic auth or in the
  form (`invalid_client_id`, `bad_client_secret`), the code once (`invalid_code`, also when used
  or expired), the same redirect URI as the authorize step if it sent one (`bad_redirect_uri`).
  It answers as Slack does: `access_token` (the workspace's bot token, the same one again on a
  reinstall), `token_type: bot`, `scope`, `bot_user_id`, `app_id`, `team`, `enterprise`,
  `authed_user`, `is_enterprise_install`.
- Every Web API call acts in the workspace of its token: `auth.test` answers with that team and
  bot; a channel of another workspace is `channel_not_found`, a file of another workspace
  `file_not_found`; rate limits count per workspace and method, as Slack's tiers do; a revoked
  token (`uninstall`) answers `token_revoked`.
- An Enterprise Grid org (`add_workspace(..., enterprise_id=...)` puts workspaces in one) can be
  installed org-wide (the authorize page given the org's id as `team`, or `install_as` it):
  `oauth.v2.access` answers `team: null`, the `enterprise`, `is_enterprise_install: true` and one
  org bot; its token acts in any workspace of the org (the workspace of the channel a call names)
  and in no other, as Slack's org-level tokens do.
"""

from __future__ import annotations

import base64
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from aiohttp import web

from tests.fakes.slack_events import app_uninstalled_event, tokens_revoked_event
from tests.fakes.slack_records import APP_ID, SlackError, _str

if TYPE_CHECKING:
    from tests.fakes.slack import FakeSlack

    _Base = FakeSlack
else:
    _Base = object

CODE_SECONDS = 600  # an OAuth code is good for ten minutes, once
AUTHORIZE_PATH = "/oauth/v2/authorize"


@dataclass
class FakeWorkspace:
    """One Slack workspace the app can be installed in."""

    team_id: str
    name: str
    bot_user_id: str
    bot_id: str
    enterprise_id: str | None = None
    enterprise_name: str | None = None
    token: str | None = None  # the bot token an install issued (None: not installed)
    scopes: set[str] = field(default_factory=set)
    installed_by: str | None = None
    org_wide: bool = False  # an org's token acting with no workspace named (auth.test)

    @property
    def domain(self) -> str:
        return f"{self.team_id.lower()}.slack.com"


@dataclass
class FakeOrg:
    """An Enterprise Grid org: its workspaces share one bot when the app is installed org-wide."""

    enterprise_id: str
    name: str
    bot_user_id: str
    bot_id: str
    token: str | None = None


@dataclass
class _Code:
    team_id: str  # a workspace, or an org's enterprise id for an org-wide install
    redirect_uri: str | None  # as sent to the authorize page (None: the app's configured one was used)
    scopes: set[str]
    installer: str
    expires_at: float
    used: bool = False


@dataclass
class OAuthApp:
    client_id: str
    client_secret: str
    redirect_url: str  # the app's one configured Redirect URL


class Workspaces(_Base):
    """Workspaces, tokens and the install flow (see the module docstring)."""

    def _init_workspaces(self, team_id: str, name: str, bot_user_id: str, bot_id: str) -> None:
        self.default_workspace = FakeWorkspace(team_id=team_id, name=name, bot_user_id=bot_user_id, bot_id=bot_id)
        self.workspaces: dict[str, FakeWorkspace] = {team_id: self.default_workspace}
        self.orgs: dict[str, FakeOrg] = {}
        self._org_tokens: dict[str, str] = {}  # an org-wide install's bot token -> enterprise id
        self._caller: FakeWorkspace = self.default_workspace  # the workspace the current call acts in
        self._channel_team: dict[str, str] = {}  # channel -> the workspace it belongs to
        self._tokens: dict[str, str] = {}  # issued bot token -> team id
        self._revoked: set[str] = set()
        self._codes: dict[str, _Code] = {}
        self.oauth_app: OAuthApp | None = None
        self._installing_team = team_id
        self._deny_next = False
        self.installs: list[tuple[str, str]] = []  # (team id, token) per completed oauth.v2.access
        self.uninstalled_by_app: list[str] = []  # team (or org) ids the app removed itself from (apps.uninstall)

    # ------------------------------------------------------------ test controls

    def add_workspace(self, team_id: str, *, name: str | None = None, bot_user_id: str | None = None,
                      bot_id: str | None = None, channels: tuple[str, ...] = (),
                      enterprise_id: str | None = None) -> FakeWorkspace:
        """Another workspace the app can be installed in, with its own bot user and channels."""
        with self._lock:
            workspace = FakeWorkspace(
                team_id=team_id, name=name or f"Workspace {team_id}", bot_user_id=bot_user_id or f"UBOT{team_id}",
                bot_id=bot_id or f"B{team_id}", enterprise_id=enterprise_id,
                enterprise_name=f"Org {enterprise_id}" if enterprise_id else None,
            )
            self.workspaces[team_id] = workspace
            if enterprise_id and enterprise_id not in self.orgs:
                self.orgs[enterprise_id] = FakeOrg(enterprise_id, f"Org {enterprise_id}", f"WBOT{enterprise_id}",
                                                   f"B{enterprise_id}")
            for channel in channels:
                self._channel_team[channel] = team_id
            return workspace

    def add_channel(self, team_id: str, channel: str) -> None:
        with self._lock:
            self._channel_team[channel] = team_id

    def configure_oauth(self, client_id: str, client_secret: str, redirect_url: str) -> None:
        """The app's credentials and Redirect URL, as set in its settings; only issued tokens work from now."""
        with self._lock:
            self.oauth_app = OAuthApp(client_id, client_secret, redirect_url)

    def install_as(self, team_id: str) -> None:
        """The workspace the person on the authorize page installs into (when the URL names none)."""
        with self._lock:
            self._installing_team = team_id

    def deny_next_install(self) -> None:
        """The next person on the authorize page presses Cancel."""
        with self._lock:
            self._deny_next = True

    def uninstall(self, team_id: str) -> dict[str, Any]:
        """The workspace (or org, by its enterprise id) removes the app: its token is revoked.
        Returns the `app_uninstalled` envelope Slack sends the app (over HTTP or Socket Mode)."""
        with self._lock:
            org = self.orgs.get(team_id)
            if org is not None:
                if org.token:
                    self._revoked.add(org.token)
                    self._org_tokens.pop(org.token, None)
                    org.token = None
                some = next(w for w in self.workspaces.values() if w.enterprise_id == team_id)
                return app_uninstalled_event(team_id=some.team_id, bot_user_id=org.bot_user_id,
                                             enterprise_id=team_id, is_enterprise_install=True)
            workspace = self.workspaces[team_id]
            if workspace.token:
                self._revoked.add(workspace.token)
                self._tokens.pop(workspace.token, None)
                workspace.token = None
            return app_uninstalled_event(team_id=team_id, bot_user_id=workspace.bot_user_id,
                                         enterprise_id=workspace.enterprise_id)

    def revoke_bot_token(self, team_id: str) -> dict[str, Any]:
        """An admin revokes the bot token: the `tokens_revoked` envelope Slack sends."""
        with self._lock:
            workspace = self.workspaces[team_id]
            if workspace.token:
                self._revoked.add(workspace.token)
                self._tokens.pop(workspace.token, None)
                workspace.token = None
            return tokens_revoked_event(team_id=team_id, bot=[workspace.bot_user_id],
                                        bot_user_id=workspace.bot_user_id)

    def issue_token(self, team_id: str) -> str:
        """The workspace's bot token as an install would issue it, for tests that skip the flow."""
        with self._lock:
            workspace = self.workspaces[team_id]
            if workspace.token is None:
                workspace.token = f"xoxb-{team_id.lower()}-{secrets.token_hex(12)}"
                self._tokens[workspace.token] = team_id
            return workspace.token

    def token_of(self, team_id: str) -> str | None:
        with self._lock:
            return self.workspaces[team_id].token

    def calls_in(self, team_id: str) -> list[tuple[str, dict[str, Any]]]:
        """Every Web API call made with a token of this workspace, in order."""
        with self._lock:
            return [call for call, team in zip(self._calls, self._call_teams, strict=True) if team == team_id]

    # ------------------------------------------------------------ who is calling

    def _workspace_of_token(self, token: str, params: dict[str, Any] | None = None) -> FakeWorkspace:
        """The workspace a bot token acts in (for an org's token, the workspace of the channel the
        call names); SlackError as Slack answers a bad one."""
        if token in self._revoked:
            raise SlackError("token_revoked")
        enterprise = self._org_tokens.get(token)
        if enterprise is not None:
            return self._org_acting(self.orgs[enterprise], params or {})
        team = self._tokens.get(token)
        if team is not None:
            return self.workspaces[team]
        if self.oauth_app is None:
            return self.default_workspace  # a one-workspace fake: any xoxb- token is its bot's
        raise SlackError("invalid_auth")

    def _org_acting(self, org: FakeOrg, params: dict[str, Any]) -> FakeWorkspace:
        """An org-wide token acts in the workspace of the call's channel, with the org's bot."""
        channel = _str(params.get("channel") or params.get("channel_id"))
        if channel:
            workspace = self.workspaces.get(self.team_of_channel(channel))
            if workspace is None or workspace.enterprise_id != org.enterprise_id:
                raise SlackError("channel_not_found")
            return FakeWorkspace(team_id=workspace.team_id, name=workspace.name, bot_user_id=org.bot_user_id,
                                 bot_id=org.bot_id, enterprise_id=org.enterprise_id, enterprise_name=org.name)
        return FakeWorkspace(team_id=org.enterprise_id, name=org.name, bot_user_id=org.bot_user_id,
                             bot_id=org.bot_id, enterprise_id=org.enterprise_id, enterprise_name=org.name,
                             org_wide=True)

    def team_of_channel(self, channel: str) -> str:
        """The workspace a channel belongs to (the first one unless a test said otherwise)."""
        return self._channel_team.get(channel, self.default_workspace.team_id)

    def _claim_channel(self, channel: str, team_id: str | None) -> None:
        """A channel seen in an event of a workspace belongs to it."""
        if team_id and channel not in self._channel_team and team_id in self.workspaces:
            self._channel_team[channel] = team_id

    def _refuse_foreign_channel(self, caller: FakeWorkspace, params: dict[str, Any]) -> None:
        for name in ("channel", "channel_id"):
            channel = _str(params.get(name))
            if channel and self.team_of_channel(channel) != caller.team_id:
                raise SlackError("channel_not_found")

    # ------------------------------------------------------------ the install flow

    def _register_oauth(self, app: web.Application) -> None:
        app.router.add_get(AUTHORIZE_PATH, self._authorize)
        self._methods["oauth.v2.access"] = self._oauth_v2_access
        self._methods["apps.uninstall"] = self._apps_uninstall

    async def _authorize(self, request: web.Request) -> web.Response:
        """The page a person approves the install on; here they approve at once (or cancel)."""
        q = request.query
        with self._lock:
            app = self.oauth_app
            if app is None or q.get("client_id") != app.client_id:
                return web.Response(status=400, text="Invalid client_id parameter", content_type="text/plain")
            sent_uri = q.get("redirect_uri") or None
            if sent_uri is not None and sent_uri != app.redirect_url:
                return web.Response(status=400, text="redirect_uri did not match any configured URIs",
                                    content_type="text/plain")
            scopes = {s for s in q.get("scope", "").split(",") if s}
            if not scopes:
                return web.Response(status=400, text="Invalid permissions requested (no scope)",
                                    content_type="text/plain")
            back = {"state": q.get("state", "")}
            if self._deny_next:
                self._deny_next = False
                back["error"] = "access_denied"
            else:
                team = q.get("team") or self._installing_team
                if team not in self.workspaces and team not in self.orgs:
                    return web.Response(status=400, text=f"Unknown workspace {team}", content_type="text/plain")
                code = f"{secrets.randbelow(10**10)}.{secrets.token_hex(20)}"
                self._codes[code] = _Code(team, sent_uri, scopes, "U0INSTALLER", time.monotonic() + CODE_SECONDS)
                back["code"] = code
        raise web.HTTPFound(f"{sent_uri or app.redirect_url}?{urlencode(back)}")

    def _oauth_v2_access(self, p: dict[str, Any]) -> dict[str, Any]:
        """Credentials arrive in the form or (as Slack prefers) by HTTP Basic auth, which the
        server puts in `p` as `client_id`/`client_secret` before the call gets here."""
        app = self.oauth_app
        client_id, client_secret = _str(p.get("client_id")), _str(p.get("client_secret"))
        if app is None or client_id != app.client_id:
            raise SlackError("invalid_client_id")
        if client_secret != app.client_secret:
            raise SlackError("bad_client_secret")
        grant = self._codes.get(_str(p.get("code")))
        if grant is None or grant.used or time.monotonic() > grant.expires_at:
            raise SlackError("invalid_code")
        if grant.redirect_uri is not None and _str(p.get("redirect_uri")) != grant.redirect_uri:
            raise SlackError("bad_redirect_uri")
        grant.used = True
        if grant.team_id in self.orgs:
            return self._org_install(self.orgs[grant.team_id], grant)
        workspace = self.workspaces[grant.team_id]
        self.issue_token(workspace.team_id)  # a reinstall keeps the bot token it already has
        workspace.scopes = set(grant.scopes)
        workspace.installed_by = grant.installer
        self.installs.append((workspace.team_id, workspace.token))
        enterprise = ({"id": workspace.enterprise_id, "name": workspace.enterprise_name}
                      if workspace.enterprise_id else None)
        return {
            "access_token": workspace.token,
            "token_type": "bot",
            "scope": ",".join(sorted(grant.scopes)),
            "bot_user_id": workspace.bot_user_id,
            "app_id": APP_ID,
            "team": {"id": workspace.team_id, "name": workspace.name},
            "enterprise": enterprise,
            "authed_user": {"id": grant.installer},
            "is_enterprise_install": False,
        }


    def _apps_uninstall(self, p: dict[str, Any]) -> dict[str, Any]:
        """The app removes itself from the caller's workspace (or org): its client's id and secret in
        the form with the installation's bot token; the token is revoked, as an uninstall revokes it.
        Slack then sends `app_uninstalled` (a test delivers `uninstall()`'s envelope when it wants it)."""
        app = self.oauth_app
        if app is None or _str(p.get("client_id")) != app.client_id:
            raise SlackError("invalid_client_id")
        if _str(p.get("client_secret")) != app.client_secret:
            raise SlackError("bad_client_secret")
        caller = self._caller
        org = self.orgs.get(caller.enterprise_id or "") if caller.team_id == caller.enterprise_id else None
        token = org.token if org is not None else self.workspaces[caller.team_id].token
        if token is not None:
            self._revoked.add(token)
            self._tokens.pop(token, None)
            self._org_tokens.pop(token, None)
        if org is not None:
            org.token = None
        else:
            self.workspaces[caller.team_id].token = None
        self.uninstalled_by_app.append(caller.team_id)
        return {}

    def _org_install(self, org: FakeOrg, grant: _Code) -> dict[str, Any]:
        """An org-wide install: one token for every workspace of the org, no team."""
        if org.token is None:
            org.token = f"xoxb-{org.enterprise_id.lower()}-{secrets.token_hex(12)}"
            self._org_tokens[org.token] = org.enterprise_id
        self.installs.append((org.enterprise_id, org.token))
        return {
            "access_token": org.token,
            "token_type": "bot",
            "scope": ",".join(sorted(grant.scopes)),
            "bot_user_id": org.bot_user_id,
            "app_id": APP_ID,
            "team": None,
            "enterprise": {"id": org.enterprise_id, "name": org.name},
            "authed_user": {"id": grant.installer},
            "is_enterprise_install": True,
        }


def basic_credentials(header: str) -> tuple[str, str] | None:
    """client_id and client_secret from an `Authorization: Basic …` header."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        client_id, _, secret = base64.b64decode(value.strip()).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    return client_id, secret
