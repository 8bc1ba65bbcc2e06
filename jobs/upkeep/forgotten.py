"""What a forget or a maintenance round deleted, the sentence that says so, and that it stays deleted
after a failover (`held`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, Protocol

from redis import Redis

from ..keyspace import keys
from ..keyspace.connection import ask_primary, reconnect_to_primary
from ..keyspace.replication import primary_of, replicated

__all__ = ["HELD_TRIES", "REPLICATED_WITHIN_SECONDS", "Forgotten", "held"]

log = logging.getLogger(__name__)

# A replica acknowledges each second; a failover takes the sentinels 5-11 s (down-after, the vote, the
# old primary's demotion). A forget waits this long for a replica to have its deletions, then deletes
# again on the primary named then, at most HELD_TRIES times.
REPLICATED_WITHIN_SECONDS = 15.0
HELD_TRIES = 4
_WITNESSES_PER_CALL = 500  # run states asked about in one EXISTS


@dataclass
class Forgotten:
    """What a forget or a round deleted."""

    runs: list[str] = field(default_factory=list)
    keys: int = 0
    threads: int = 0
    stopped: list[str] = field(default_factory=list)  # active runs stopped first
    kept_active: list[str] = field(default_factory=list)  # active runs the round left alone

    def add(self, other: Forgotten) -> None:
        self.runs += other.runs
        self.keys += other.keys
        self.threads += other.threads
        self.stopped += other.stopped
        self.kept_active += other.kept_active

    def summary(self) -> str:
        """What went, in a sentence (`forget this thread`, `deepthread forget`)."""
        if not self.runs and not self.keys:
            return "Nothing was stored for that, so nothing was deleted."
        runs = f"{len(self.runs)} run{'s' if len(self.runs) != 1 else ''}"
        threads = f"{self.threads} thread{'s' if self.threads != 1 else ''}"
        stopped = f" ({len(self.stopped)} stopped first)" if self.stopped else ""
        return (
            f"Deleted {runs}{stopped} in {threads}: {self.keys} stored record{'s' if self.keys != 1 else ''} "
            "(questions, reports, sources, page and file texts, request logs, the thread's memory and settings). "
            "The workspace's spend totals keep their sums."
        )


def _kept(redis: Redis, run_ids: list[str]) -> bool:
    """Whether the primary the sentinels name still holds one of the runs forgotten (the deletions went
    to a primary being demoted); False with one Redis (what it acknowledged is so)."""
    for start in range(0, len(run_ids), _WITNESSES_PER_CALL):
        batch = run_ids[start : start + _WITNESSES_PER_CALL]
        if ask_primary(redis, "EXISTS", *(keys.run_state(r) for r in batch)):
            return True
    return False


class _Forgetter(Protocol):
    redis: Redis
    _holding: bool


P = ParamSpec("P")


def held(
    forget: Callable[Concatenate[Any, P], Forgotten],
) -> Callable[Concatenate[Any, P], Forgotten]:
    """A forget whose deletions hold after a failover: done, then done again on the primary the
    sentinels name until one of its replicas has them all (jobs/keyspace/replication.py). Deleting is
    safe to repeat. Forgets within a held forget (a workspace's threads) are held once, by the outer one."""

    @functools.wraps(forget)
    def holding(self: _Forgetter, *args: P.args, **kwargs: P.kwargs) -> Forgotten:
        if self._holding:
            return forget(self, *args, **kwargs)
        self._holding = True
        try:
            since = primary_of(self.redis)
            gone = forget(self, *args, **kwargs)
            for _ in range(HELD_TRIES):
                if replicated(self.redis, since, REPLICATED_WITHIN_SECONDS) and not _kept(self.redis, gone.runs):
                    return gone
                log.warning(
                    "%s: its deletions are not on a replica of the primary the sentinels name (a failover "
                    "under way): deleting again there",
                    forget.__name__,
                )
                reconnect_to_primary(self.redis)
                since = primary_of(self.redis)
                forget(self, *args, **kwargs)
            log.error(
                "%s: no replica confirmed its deletions after %d tries; a failover now could bring them back: "
                "run the same forget again once Redis is healthy",
                forget.__name__,
                HELD_TRIES,
            )
            return gone
        finally:
            self._holding = False

    return holding
