"""The Lua scripts every run-state write goes through, atomic on the server, and what they answer.

`_WRITE` refuses a job's write once that job's lease is no longer the run's (the fence,
jobs/control/ownership.py), refuses to touch a finished run (lifecycle moves only forward: queued ->
running -> completed | failed | stopped), applies a compare-and-set on the version when the writer
computed its change from a copy, bumps the version, and announces the change on the updates stream.
`_LINK` attaches the run's Slack messages to its record."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .models import RunStatus

__all__ = ["WriteOutcome", "WriteResult"]


_WRITE = """
-- KEYS: state, sections, section-order, sources, source-order, active set, updates stream, run lock, steps
-- ARGV: run id, ttl, expected version or '', allowed after finish '1'/'0', new status or '',
--       stream maxlen, fence or '', then: n, n field/value pairs; n, n id/json/move-to-end triples;
--       n, n marker/json pairs; the step's json or '', '1' when it is a new step (appended) or '0' (it
--       replaces the last), steps kept
local rank = {queued=0, planned=1, running=2, completed=3, failed=3, stopped=3}
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return {0, 0, ''} end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
-- A job's write names its lease; it lands only while the lock holds exactly that lease (ownership.py).
if ARGV[7] ~= '' and redis.call('GET', KEYS[8]) ~= ARGV[7] then return {-3, version, current} end
if rank[current] == 3 and ARGV[4] ~= '1' then return {-1, version, current} end
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= version then return {-2, version, current} end
local status = current
if ARGV[5] ~= '' and rank[ARGV[5]] > rank[current] then
  status = ARGV[5]
  redis.call('HSET', KEYS[1], 'status', status)
end
local i = 8
local n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]); i = i + 2 end
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  if ARGV[i + 2] == '1' then
    redis.call('ZADD', KEYS[3], redis.call('HINCRBY', KEYS[1], 'section_seq', 1), ARGV[i])
  end
  i = i + 3
end
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  if redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1]) == 1 then redis.call('RPUSH', KEYS[5], ARGV[i]) end
  i = i + 2
end
if ARGV[i] ~= '' then
  if ARGV[i + 1] == '1' or redis.call('LLEN', KEYS[9]) == 0 then
    redis.call('RPUSH', KEYS[9], ARGV[i])
    redis.call('LTRIM', KEYS[9], -tonumber(ARGV[i + 2]), -1)
  else
    redis.call('LSET', KEYS[9], -1, ARGV[i])
  end
  redis.call('EXPIRE', KEYS[9], ARGV[2])
end
version = redis.call('HINCRBY', KEYS[1], 'version', 1)
if rank[status] == 3 then redis.call('SREM', KEYS[6], ARGV[1]) end
local epoch = string.match(ARGV[7], '^(%d+):')
if epoch then  -- who wrote it: a reader can tell an old holder's write from a new one's
  redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[6], '*', 'run_id', ARGV[1], 'version', version, 'epoch', epoch)
else
  redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[6], '*', 'run_id', ARGV[1], 'version', version)
end
for k = 1, 5 do redis.call('EXPIRE', KEYS[k], ARGV[2]) end
return {1, version, status}
"""

_LINK = """
-- KEYS: the thread's run list, the active set. ARGV: run id, the run it must follow or '', ttl.
-- Compare-and-set on the thread: a continuation is linked only if its parent is still the latest.
if ARGV[2] ~= '' then
  local last = redis.call('LINDEX', KEYS[1], -1)
  if last ~= ARGV[2] then return last end
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[1])
return ARGV[1]
"""


class WriteOutcome(str, Enum):
    written = "written"
    not_found = "not_found"
    closed = "closed"  # the run had finished: lifecycle moves only forward
    conflict = "conflict"  # the writer's copy was older than the stored run
    fenced = "fenced"  # the writer's lease is no longer the run's (jobs/control/ownership.py)


@dataclass(frozen=True)
class WriteResult:
    outcome: WriteOutcome
    version: int
    status: RunStatus | None
