"""Which installation a Slack call acts for: the workspace (or Enterprise Grid org) whose token it uses.

In multi-workspace mode every workspace that installed the app has its own bot token, and every
run belongs to the installation its question came through (`Run.team`, `Run.enterprise`). A
listener's client already carries the token Bolt authorized the event with; code that acts for a
run outside an event (the publisher, serve's sweeps) says whose run it is with
`acting_for(Tenant.of_run(run))`, and the shared client looks that installation's token up for
each call (client.py). A call that names no installation has no token: it fails loudly rather
than guess.

Org-wide installs (Enterprise Grid) are found as Bolt finds them: by enterprise id alone when the
install is org-wide, else by enterprise and team.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jobs import Run

__all__ = ["Tenant", "acting", "acting_for"]


@dataclass(frozen=True)
class Tenant:
    """An installation of the app: a workspace, or an Enterprise Grid org installed org-wide.

    `team` is always the workspace the run or event is in (rate limits, budgets and keys are per
    workspace); for an org-wide install the token is the org's, found by `enterprise` alone."""

    team: str | None
    enterprise: str | None = None
    enterprise_install: bool = False

    @classmethod
    def of_run(cls, run: Run) -> Tenant:
        return cls(team=run.team, enterprise=run.enterprise, enterprise_install=run.enterprise_install)

    @classmethod
    def of_context(cls, context: Mapping[str, Any], body: Mapping[str, Any] | None = None) -> Tenant:
        """The installation Bolt authorized a request for (its context), the body's team as a fallback."""
        team = context.get("team_id") or (body or {}).get("team_id")
        return cls(
            team=team,
            enterprise=context.get("enterprise_id") or (body or {}).get("enterprise_id"),
            enterprise_install=bool(context.get("is_enterprise_install")),
        )

    @property
    def label(self) -> str:
        """For logs: `T123` or `E456/T123` (ids are not secrets)."""
        return f"{self.enterprise}/{self.team}" if self.enterprise else str(self.team)


_acting: ContextVar[Tenant | None] = ContextVar("deepthread_acting_for", default=None)


def acting() -> Tenant | None:
    """The installation the current task acts for, if it said."""
    return _acting.get()


@contextmanager
def acting_for(tenant: Tenant) -> Iterator[Tenant]:
    """Slack calls inside this block (and tasks started from it) use `tenant`'s token."""
    token = _acting.set(tenant)
    try:
        yield tenant
    finally:
        _acting.reset(token)
