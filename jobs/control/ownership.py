"""Who does a run's work: one holder at a time, with a fencing token, so a holder that lost its
place can never write over the one that took it.

    deepthread:run:{id}:lock    "{epoch}:{token}", expiring: the holder and its fence
    deepthread:run:{id}:epoch   counter: one more for every new holder
    deepthread:run:{id}:alive   when the holder last said so (epoch seconds, about once a minute):
                                how far a crashed run got

A job `acquire`s the run's lease: only when nobody holds it, and with the next epoch. It keeps it by
renewing (compare-and-expire: only while the lock still names this exact holder), and lets go by
compare-and-delete, so no holder ever extends or deletes another's lock. Every write a holder makes
to the run (its state, its checkpoint, its stored results) names the fence; the writer's script
refuses it unless the lock holds exactly that fence (jobs/records/store.py, jobs/records/stores.py), and the holder
is told at once (LeaseLost). A holder that cannot show a renewal within the lease's lifetime counts
it lost as well, without waiting for Redis to say so, and stops working the run.

The lease lives longer than a command's retry window (jobs/keyspace/connection.py): an outage that commands
ride out never costs a run its holder; a longer one hands the run to a new holder, and the old one's
late writes are refused. `Tenure` is one holder's view of one lease; a process may hold many.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import RedisError

from ..exceptions import LeaseLost
from ..keyspace import keys
from ..process.background import Stop
from ..process.metrics import metrics

__all__ = ["LEASE_SECONDS", "Lease", "LeaseLost", "Tenure", "acquire", "holder", "release", "renew"]

log = logging.getLogger(__name__)

# A run's lease: longer than jobs.keyspace.connection.RETRY_WINDOW_SECONDS (30 s) plus a renewal interval, so
# a Redis restart or a failover that commands wait out leaves the run with its holder. A dead
# worker's run waits this long before another resumes it (DEEPTHREAD_RUN_LOCK_SECONDS changes it).
# 90 s, renewed every 30 s: a run waiting on the model costs Redis ~7 commands a minute for its
# lease (a renewal is a script and two commands in it; 60 s, renewed every 20 s, was 12).
LEASE_SECONDS = 90.0
# How often a renewal also records the holder alive: the precision of a resumed run's active time.
ALIVE_EVERY_SECONDS = 60.0
# The epoch counter outlives every lease of the run (its retries included).
EPOCH_TTL_SECONDS = keys.CONTROL_TTL_SECONDS

_ACQUIRE = """
-- KEYS: lock, epoch counter. ARGV: token, lease ms, counter ttl s. Returns the new epoch, or 0 when held.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local epoch = redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], epoch .. ':' .. ARGV[1], 'PX', ARGV[2])
return epoch
"""
_RENEW = """
-- KEYS: lock, alive. ARGV: fence, lease ms, now (epoch s), alive ttl s, "1" to record alive.
-- Compare-and-expire.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[5] == '1' then redis.call('SET', KEYS[2], ARGV[3], 'EX', ARGV[4]) end
return 1
"""
_RELEASE = """
-- KEYS: lock. ARGV: fence. Compare-and-delete.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"""


@dataclass(frozen=True)
class Lease:
    """One holder's lease on one run, as acquired."""

    run_id: str
    token: str  # who holds it (the job's id)
    epoch: int  # one more than the holder before
    acquired_at: float = field(default_factory=time.monotonic, compare=False)

    @property
    def fence(self) -> str:
        """What the holder's writes carry, and what the lock holds while the lease is theirs."""
        return f"{self.epoch}:{self.token}"


def acquire(redis: Redis, run_id: str, token: str, seconds: float = LEASE_SECONDS) -> Lease | None:
    """The run's lease with the next epoch, or None while another holds it."""
    started = time.monotonic()
    epoch = int(
        redis.register_script(_ACQUIRE)(
            keys=[keys.lock(run_id), keys.epoch(run_id)], args=[token, int(seconds * 1000), EPOCH_TTL_SECONDS]
        )
    )
    return Lease(run_id, token, epoch, acquired_at=started) if epoch else None


def release(redis: Redis, lease: Lease) -> bool:
    """Let go, if the lock is still this lease's (never another holder's)."""
    return bool(redis.register_script(_RELEASE)(keys=[keys.lock(lease.run_id)], args=[lease.fence]))


async def renew(redis: AsyncRedis, lease: Lease, seconds: float = LEASE_SECONDS, *, alive: bool = True) -> bool:
    """Extend the lease by `seconds` if the lock still holds it (and, with `alive`, record when);
    False once it does not."""
    answer = await redis.register_script(_RENEW)(
        keys=[keys.lock(lease.run_id), keys.alive(lease.run_id)],
        args=[lease.fence, int(seconds * 1000), repr(time.time()), keys.RUN_ALIVE_TTL_SECONDS, "1" if alive else "0"],
    )
    return bool(answer)


def holder(redis: Redis, run_id: str) -> str | None:
    """The fence of whoever holds the run now, if anyone."""
    value = redis.get(keys.lock(run_id))
    return value.decode() if isinstance(value, bytes) else value


class Tenure:
    """A holder's time with one lease: kept by `keep()`, ended by `lose()` (a failed renewal, or a
    write the fence refused), which tells every `on_lost` callback once, e.g. to cancel the work."""

    def __init__(self, lease: Lease, seconds: float = LEASE_SECONDS) -> None:
        self.lease = lease
        self.seconds = seconds
        self.lost: str | None = None  # why, once lost
        self._callbacks: list[Callable[[], object]] = []

    @property
    def fence(self) -> str:
        return self.lease.fence

    def on_lost(self, callback: Callable[[], object]) -> None:
        self._callbacks.append(callback)

    def lose(self, why: str) -> None:
        if self.lost is not None:
            return
        self.lost = why
        metrics().locks_lost.labels(lock="run").inc()  # for operators: a job stalled past its lease
        log.warning("run %s: this job lost its lease (%s); it stops working the run", self.lease.run_id, why)
        for callback in self._callbacks:
            callback()

    def refused(self) -> LeaseLost:
        """A write carrying this lease's fence was refused: the lease is gone. Returns the error to raise."""
        self.lose("a write was refused: another job holds the run")
        return LeaseLost(self.lease.run_id)

    async def keep(self, redis: AsyncRedis, stop: Stop | None = None) -> None:
        """Renew every third of the lease until asked to stop (between renewals, never mid-call:
        jobs/process/background.py), or until it is lost: refused by Redis, or not renewed within its
        lifetime (measured from when each renewal was sent, so this side always gives up before
        Redis lets the lock go)."""
        stop = stop or Stop()
        renewed_at = self.lease.acquired_at
        alive_at = -math.inf
        while self.lost is None and not await stop.pause(self.seconds / 3):
            sent = time.monotonic()
            left = renewed_at + self.seconds - sent
            if left <= 0:
                self.lose("not renewed within its lifetime")
                return
            try:
                record = sent - alive_at >= ALIVE_EVERY_SECONDS
                kept = await asyncio.wait_for(renew(redis, self.lease, self.seconds, alive=record), left)
            except TimeoutError:
                self.lose("Redis did not answer a renewal within the lease's lifetime")
                return
            except RedisError as exc:  # the retry window ran out; time may be left for another try
                log.warning("run %s: renewing the lease failed (%s); trying again", self.lease.run_id, exc)
                continue
            if not kept:
                self.lose("the lock no longer holds it")
                return
            renewed_at = sent
            if record:
                alive_at = sent
