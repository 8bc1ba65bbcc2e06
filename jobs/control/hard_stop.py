"""The hard stop's deadline, kept in Redis so whichever process is alive carries it out.

A stop asks the loop to finalize; if it has not wound down after a grace period, the run is
ended as stopped and its job killed. The deadline used to be a timer in the serve process, so
a restart of serve lost it. Now the stop request and its deadline are recorded together (one
script, on Redis's clock), and serve and every worker check for due deadlines. A claim (one
script) moves a due deadline a lease ahead, so exactly one checker forces each stop, and if it
dies before it is done, the stop falls due again for another.

    deepthread:hard-stops          sorted set: run id -> when its stop is forced (epoch s)
    deepthread:hard-stops:reasons  hash: run id -> the reason the forced stop records
"""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis

from agent.control import StopRequest

from ..keyspace import keys
from ..keyspace.connection import text
from .control import announce

__all__ = ["HARD_STOP_SECONDS", "DueStop", "claim_due", "done", "forced_reason", "request_stop_with_deadline"]

# After a stop, the loop gets this long to finish on its own before its job is killed
# (a final answer takes up to ~60 s; DEEPTHREAD_HARD_STOP_SECONDS changes it).
HARD_STOP_SECONDS = 90.0
# Due entries handled per check: a backlog drains over a few checks instead of one long call.
MAX_DUE_PER_CHECK = 50
# A claimed stop not reported done within this long (its claimer died) is due again.
CLAIM_LEASE_SECONDS = 60

_REQUEST = """
-- KEYS: the run's stop key, the deadlines, the reasons. ARGV: stop request, ttl, run id, grace s, reason.
-- The stop and its deadline are written together: no crash can leave a stop without its fallback.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then return 0 end
local now = redis.call('TIME')
redis.call('ZADD', KEYS[2], tonumber(now[1]) + tonumber(now[2]) / 1e6 + tonumber(ARGV[4]), ARGV[3])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
return 1
"""

_CLAIM = """
-- KEYS: the deadlines, the reasons. ARGV: lease s, most to claim. Returns run id, reason, ...
-- Atomic on the server: of several processes checking at once, each due entry goes to one.
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', t, 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(due) do
  redis.call('ZADD', KEYS[1], t + tonumber(ARGV[1]), id)
  table.insert(out, id)
  table.insert(out, redis.call('HGET', KEYS[2], id) or '')
end
return out
"""


@dataclass(frozen=True)
class DueStop:
    run_id: str
    reason: str


def forced_reason(by: str, grace_seconds: float) -> str:
    return f"stopped by {by} (forced after {grace_seconds:g} s)"


def request_stop_with_deadline(redis: Redis, run_id: str, by: str, grace_seconds: float) -> bool:
    """Ask the loop to stop and record when to force it. True for the first request only."""
    script = redis.register_script(_REQUEST)
    created = script(
        keys=[keys.stop(run_id), keys.HARD_STOPS, keys.HARD_STOP_REASONS],
        args=[
            StopRequest(by=by).model_dump_json(),
            keys.CONTROL_TTL_SECONDS,
            run_id,
            grace_seconds,
            forced_reason(by, grace_seconds),
        ],
    )
    if created:
        announce(redis, run_id)  # the waiting run hears of it at once
    return bool(created)


def claim_due(redis: Redis, lease_seconds: float = CLAIM_LEASE_SECONDS) -> list[DueStop]:
    """The deadlines that have passed, each claimed by this caller alone: the claim moves the
    deadline a lease ahead, so if this caller dies before `done`, another one retries later."""
    script = redis.register_script(_CLAIM)
    claimed = script(keys=[keys.HARD_STOPS, keys.HARD_STOP_REASONS], args=[lease_seconds, MAX_DUE_PER_CHECK])
    return [
        DueStop(text(run_id), text(reason) or "stopped (forced after its grace period)")
        for run_id, reason in zip(claimed[::2], claimed[1::2], strict=True)
    ]


def done(redis: Redis, run_id: str) -> None:
    """The forced stop is carried out (or no longer needed): forget its deadline."""
    pipe = redis.pipeline(transaction=True)
    pipe.zrem(keys.HARD_STOPS, run_id)
    pipe.hdel(keys.HARD_STOP_REASONS, run_id)
    pipe.execute()
