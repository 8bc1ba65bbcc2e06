"""Who may install the app (multi-workspace mode): DEEPTHREAD_INSTALL_ALLOW lists the workspaces
(team ids, T…) and Enterprise Grid orgs (enterprise ids, E…) that may; every workspace of a listed
org may, and an org-wide install needs its org listed. Empty: any workspace that completes Slack's
flow may (`deepthread doctor` warns, since each then spends the operator's model key).
"""

from __future__ import annotations

import html

from pydantic import BaseModel

__all__ = ["InstallAllowlist", "refusal_page"]


class InstallAllowlist(BaseModel):
    ids: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, raw: str | None) -> InstallAllowlist:
        return cls(ids=frozenset(part.strip() for part in (raw or "").split(",") if part.strip()))

    @property
    def open(self) -> bool:
        """No list: anyone who completes the flow installs."""
        return not self.ids

    def admits(self, team: str | None, enterprise: str | None, *, org_wide: bool = False) -> bool:
        if self.open:
            return True
        if enterprise and enterprise in self.ids:
            return True
        return not org_wide and bool(team) and team in self.ids


def refusal_page(team: str | None, team_name: str | None, enterprise: str | None) -> str:
    """The page the installer sees instead of "installed": what happened and whom to ask."""
    who = html.escape(" ".join(filter(None, [team_name, f"({team or enterprise})"])))
    ident = html.escape(team or enterprise or "")
    return (
        "<html><head><meta charset='utf-8'><title>Not installed</title></head><body>"
        f"<h2>Deepthread was not installed</h2><p>This Slack workspace {who} is not on this Deepthread "
        "deployment's list of workspaces that may install it, so nothing was saved and the bot will not answer "
        f"there.</p><p>Ask the deployment's operator to add <code>{ident}</code> to DEEPTHREAD_INSTALL_ALLOW, "
        "then install again.</p></body></html>"
    )
