"""Records named before their keys had a team (see jobs/keyspace/keys.py), moved under their team once.

A deployment upgraded from single-workspace keys still has threads, message links and re-check
schedules under the old names. The first read under the new name that finds nothing looks at
the old one and moves it (RENAMENX, so a record written under the new name meanwhile wins), but
only when the runs it names belong to the asking team: an old record never becomes readable from
another workspace.
"""

from __future__ import annotations

from collections.abc import Callable

from redis import Redis

from . import keys
from .connection import text

__all__ = ["adopt_legacy"]


def adopt_legacy(
    redis: Redis,
    new: str,
    legacy: str,
    *,
    team: str | None,
    team_of: Callable[[str], str | None],
    run_id_of: Callable[[Redis, str], str | None],
) -> bool:
    """Move `legacy` to `new` when `new` is absent and the run `run_id_of` names in the legacy record
    belongs to `team`. True when a record was moved."""
    if redis.exists(new) or not redis.exists(legacy):
        return False
    run_id = run_id_of(redis, legacy)
    if run_id is None or keys.team_part(team_of(run_id)) != keys.team_part(team):
        return False
    return bool(redis.renamenx(legacy, new))


def last_in_list(redis: Redis, key: str) -> str | None:
    """A thread's record: its latest run."""
    raw = redis.lindex(key, -1)
    return text(raw) if raw else None


def string_value(redis: Redis, key: str) -> str | None:
    """A message's record: the run it belongs to."""
    raw = redis.get(key)
    return text(raw) if raw else None
