"""Settings a workspace's admins choose for every run of the workspace, read by the job when a run
starts (so a continuation or a scheduled re-check follows the setting as it is then).

One so far: the claim check (agent/claims), on unless an admin turned it off (`claim check off`,
bot/desk/claim_check.py). DEEPTHREAD_CLAIM_CHECK=off turns it off for the whole deployment whatever
this says. Kept in one hash per workspace, deleted with the workspace (jobs/upkeep/retention.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from redis import Redis

from ..keyspace import keys

if TYPE_CHECKING:
    from agent import AgentConfig

__all__ = ["claim_check_on", "config_for", "set_claim_check"]

_CLAIM_CHECK = "claim_check"


def claim_check_on(redis: Redis, team: str | None) -> bool:
    """Whether the workspace keeps the claim check on (the default)."""
    return redis.hget(keys.workspace_settings(team), _CLAIM_CHECK) != b"off"


def set_claim_check(redis: Redis, team: str | None, on: bool) -> None:
    if on:
        redis.hdel(keys.workspace_settings(team), _CLAIM_CHECK)
    else:
        redis.hset(keys.workspace_settings(team), _CLAIM_CHECK, "off")


def config_for(redis: Redis, team: str | None, config: AgentConfig) -> AgentConfig:
    """The deployment's engine configuration as this workspace's settings leave it for a run."""
    if config.claim_check and not claim_check_on(redis, team):
        return config.model_copy(update={"claim_check": False})
    return config
