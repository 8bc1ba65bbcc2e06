"""The bot's key families (bot/keys.py) under the retention rules of jobs/retention.py, and the
deletions the bot asks for: a deleted question or report, a deleted channel, an uninstall, an
admin's `forget this thread`, `deepthread forget`, and the maintenance round."""

from __future__ import annotations

from redis import Redis

from bot import keys
from bot.publishing.agent_sessions import idle_member
from jobs.retention import JOBS_CATALOGUE, Catalogue, Entry, Owner, Retention, Rule

__all__ = ["BOT_CATALOGUE", "retention"]

_RUN = Rule(Owner.RUN)
_MESSAGE = Rule(Owner.MESSAGE)
_THREAD = Rule(Owner.THREAD)
_WORKSPACE = Rule(Owner.WORKSPACE)

BOT_RULES: dict[str, Rule] = {
    "PUBLISHER_CURSOR": Rule(Owner.DEPLOYMENT),  # a stream id
    "INSTALLATIONS": Rule(Owner.INSTALLATION),  # the installation store removes its entry with the record
    "IDLE_SESSIONS": Rule(
        Owner.DEPLOYMENT, Entry("zrem", Owner.THREAD, lambda s: idle_member(s.team, s.channel, s.thread_ts))
    ),
    "installation": Rule(Owner.INSTALLATION),
    "oauth_state": Rule(Owner.MARK),  # ten minutes
    # A run's.
    "last_sync": _RUN,
    "posts": _RUN,
    "rendered": _RUN,
    "status_lease": _RUN,
    "stream": _RUN,
    "sync_lease": _RUN,
    # A run's messages (the report's files and canvas are named by its report message).
    "canvas": _MESSAGE,
    "charts": _MESSAGE,
    "charts_stale": _MESSAGE,
    "legacy_charts": _MESSAGE,
    "spill": _MESSAGE,
    "spill_stale": _MESSAGE,
    "legacy_spill": _MESSAGE,
    # A thread's.
    "session": _THREAD,
    "session_lease": _THREAD,
    "told_files": _THREAD,
    # A workspace's.
    "plan_first": _WORKSPACE,
    "ratelimit_pause": _WORKSPACE,
    "ratelimit_window": _WORKSPACE,
    "refused": _WORKSPACE,
    "status_off": _WORKSPACE,
    "stream_refused": _WORKSPACE,
}

BOT_CATALOGUE = Catalogue(
    module=keys,
    rules=BOT_RULES,
    shared=lambda: [name for name in keys.__all__ if name.isupper()],
    not_keys=frozenset({"DEFAULT_WORKSPACE", "workspace"}),
)


def retention(redis: Redis) -> Retention:
    """Retention over every key the deployment writes: run state's and the bot's own."""
    return Retention(redis, (JOBS_CATALOGUE, BOT_CATALOGUE))
