"""The organization's model capacity in Redis: one fair queue for every worker's runs.

The same rules as the engine's in-memory limiter (agent/capacity.py), as Lua scripts so each
decision is atomic on the server: token buckets per model for requests, input tokens and
output tokens per minute (limits from the operator, else from the service's
`anthropic-ratelimit-*` headers, else the engine's defaults), refilled continuously; waiting
requests granted in round-robin order between workspaces, then between a workspace's runs,
then first come first served within a run. A 429's `retry-after` holds every run off.

Keys, per model (`deepthread:capacity:{model}:…`; all under the deployment's prefix):

    state           hash: bucket levels, when they were refilled, the limits the headers gave,
                    paused_until, the grant sequence
    teams           sorted set: workspaces with waiting requests, by when each was last served
    runs:{team}     sorted set: that workspace's runs with waiting requests, by when last served
    queue:{run}     sorted set: the run's waiting tickets, in arrival order
    tickets         hash: ticket -> its demand (team, run, requests, input, output tokens)
    seen            sorted set: ticket -> when its waiter last asked (a silent one is dropped)
    granted         sorted set: tickets granted but not yet collected, by when
    grant_numbers   hash: ticket -> its grant's number, until answered (a throttled answer to a
                    request granted before the last cut of a learned limit does not cut again)
    served:{t|r}:…  string: when a workspace or run that left the queue was last served, so
                    coming back does not put it first (kept an hour)

Keys are built inside the scripts from one prefix: a single Redis (or a Sentinel-managed
primary), as everywhere in this deployment; Redis Cluster is not a target (DESIGN.md §4).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.commands.core import AsyncScript

from agent.capacity import (
    DIMENSIONS,
    LEARN_DECREASE,
    LEARN_FLOOR_REQUESTS_PER_MINUTE,
    LEARN_RAISE_PER_ANSWER,
    LEARN_START,
    MAX_POLL_SECONDS,
    MIN_POLL_SECONDS,
    SOURCE_HEADERS,
    SOURCE_LEARNED,
    SOURCE_SET,
    WAITER_TTL_SECONDS,
    Demand,
    ModelLimits,
    Observed,
    tightest,
)

from ..keyspace import keys
from ..keyspace.connection import text
from ..process.metrics import metrics

__all__ = ["DIMENSIONS", "RedisModelLimiter", "limits_in_force", "model_limits", "waiting_runs_by_team"]

SERVED_TTL_SECONDS = 3600

# Shared by the scripts: ARGV[1] prefix, ARGV[2] now, ARGV[3..5] configured limits (0: unset),
# ARGV[6..8] the learned limits' start. Defines `limits`, `levels` (refilled to now) and `save()`.
_PRELUDE = """
local p = ARGV[1]
local now = tonumber(ARGV[2])
local dims = {'requests', 'input_tokens', 'output_tokens'}
local state = p .. 'state'
local limits, levels = {}, {}
local at = tonumber(redis.call('HGET', state, 'at') or '')
for i = 1, 3 do
  local configured = tonumber(ARGV[2 + i])
  local heard = tonumber(redis.call('HGET', state, 'limit:' .. dims[i]) or '')
  local learned = tonumber(redis.call('HGET', state, 'learned:' .. dims[i]) or '')
  if configured and configured > 0 then limits[i] = configured
  elseif heard and heard > 0 then limits[i] = heard
  elseif learned and learned > 0 then limits[i] = learned
  else limits[i] = tonumber(ARGV[5 + i]) end
  local level = tonumber(redis.call('HGET', state, 'level:' .. dims[i]) or '')
  if level == nil then level = limits[i] end
  if at then level = math.min(limits[i], level + math.max(0, now - at) * limits[i] / 60) end
  levels[i] = level
end
local function save()
  redis.call('HSET', state, 'at', tostring(now))
  for i = 1, 3 do redis.call('HSET', state, 'level:' .. dims[i], tostring(levels[i])) end
end
local function leave(t, r, ticket, served)
  redis.call('ZREM', p .. 'queue:' .. r, ticket)
  redis.call('HDEL', p .. 'tickets', ticket)
  redis.call('ZREM', p .. 'seen', ticket)
  if served then
    local s = redis.call('HINCRBY', state, 'seq', 1)
    redis.call('ZADD', p .. 'teams', s, t)
    redis.call('ZADD', p .. 'runs:' .. t, s, r)
  end
  if redis.call('ZCARD', p .. 'queue:' .. r) == 0 then
    local score = redis.call('ZSCORE', p .. 'runs:' .. t, r)
    if score then redis.call('SET', p .. 'served:r:' .. r, score, 'EX', ARGV[9]) end
    redis.call('ZREM', p .. 'runs:' .. t, r)
  end
  if redis.call('ZCARD', p .. 'runs:' .. t) == 0 then
    local score = redis.call('ZSCORE', p .. 'teams', t)
    if score then redis.call('SET', p .. 'served:t:' .. t, score, 'EX', ARGV[9]) end
    redis.call('ZREM', p .. 'teams', t)
  end
end
"""

# ARGV[9] served ttl, ARGV[10] ticket, [11] team, [12] run, [13..15] need, [16] waiter ttl.
# Returns the seconds to wait as a string ('0': granted).
_ACQUIRE = (
    _PRELUDE
    + """
local ticket, team, run = ARGV[10], ARGV[11], ARGV[12]
local waiter_ttl = tonumber(ARGV[16])
redis.call('ZREMRANGEBYSCORE', p .. 'granted', '-inf', now - waiter_ttl)
if redis.call('ZREM', p .. 'granted', ticket) == 1 then save() return '0' end
redis.call('ZADD', p .. 'seen', now, ticket)
if redis.call('HSETNX', p .. 'tickets', ticket, team .. '\\n' .. run .. '\\n' .. ARGV[13] .. '\\n' .. ARGV[14] .. '\\n' .. ARGV[15]) == 1 then
  redis.call('ZADD', p .. 'queue:' .. run, redis.call('HINCRBY', state, 'qseq', 1), ticket)
  if not redis.call('ZSCORE', p .. 'runs:' .. team, run) then
    redis.call('ZADD', p .. 'runs:' .. team, tonumber(redis.call('GET', p .. 'served:r:' .. run) or '0'), run)
  end
  if not redis.call('ZSCORE', p .. 'teams', team) then
    redis.call('ZADD', p .. 'teams', tonumber(redis.call('GET', p .. 'served:t:' .. team) or '0'), team)
  end
end
local wait = 0
local paused = tonumber(redis.call('HGET', state, 'paused_until') or '0')
if paused > now then
  wait = paused - now
else
  for _ = 1, 10000 do
    local t = redis.call('ZRANGE', p .. 'teams', 0, 0)[1]
    if not t then break end
    local r = redis.call('ZRANGE', p .. 'runs:' .. t, 0, 0)[1]
    if not r then
      redis.call('ZREM', p .. 'teams', t)
    else
      local head = redis.call('ZRANGE', p .. 'queue:' .. r, 0, 0)[1]
      if not head then
        redis.call('ZREM', p .. 'runs:' .. t, r)
      else
        local asked = tonumber(redis.call('ZSCORE', p .. 'seen', head) or tostring(now))
        local demand = redis.call('HGET', p .. 'tickets', head)
        if (now - asked > waiter_ttl) or not demand then
          leave(t, r, head, false)
        else
          local need, k = {}, 0
          for part in string.gmatch(demand, '[^\\n]+') do k = k + 1; if k > 2 then need[k - 2] = tonumber(part) end end
          local short = 0
          for i = 1, 3 do
            local n, level, limit = need[i], levels[i], limits[i]
            if not (n <= level or (n > limit and level >= limit)) then
              short = math.max(short, (math.min(n, limit) - level) / (limit / 60))
            end
          end
          if short > 0 then wait = short break end
          for i = 1, 3 do levels[i] = levels[i] - need[i] end
          redis.call('ZADD', p .. 'granted', now, head)
          redis.call('HSET', p .. 'grant_numbers', head, redis.call('HINCRBY', state, 'grants', 1))
          redis.call('EXPIRE', p .. 'grant_numbers', ARGV[9])
          leave(t, r, head, true)
        end
      end
    end
  end
end
save()
if redis.call('ZREM', p .. 'granted', ticket) == 1 then return '0' end
return tostring(math.max(wait, 0.001))
"""
)

# ARGV[10] ticket: leaves the queue (or gives back a grant it will not use).
_WITHDRAW = (
    _PRELUDE
    + """
local ticket = ARGV[10]
redis.call('ZREM', p .. 'granted', ticket)
redis.call('HDEL', p .. 'grant_numbers', ticket)
local demand = redis.call('HGET', p .. 'tickets', ticket)
if demand then
  local parts = {}
  for part in string.gmatch(demand, '[^\\n]+') do parts[#parts + 1] = part end
  leave(parts[1], parts[2], ticket, false)
end
return 1
"""
)

# ARGV[10..12] limits heard ('' unknown), [13..15] remaining heard ('' unknown), [16] retry-after ('' none),
# [17..19] reserved but unused (a failed request's tokens, given back; '' none), [20] throttled
# ('1'), [21] answered ('1'), [22] the answer's ticket, [23] decrease, [24] raise per answer, [25] floor.
# Learned limits (agent.capacity.MemoryModelLimiter._learn is the same rule) move first.
_OBSERVE = (
    _PRELUDE
    + """
local number = tonumber(redis.call('HGET', p .. 'grant_numbers', ARGV[22]) or '')
redis.call('HDEL', p .. 'grant_numbers', ARGV[22])
local learning = {}
for i = 1, 3 do
  local configured = tonumber(ARGV[2 + i])
  local heard = tonumber(redis.call('HGET', state, 'limit:' .. dims[i]) or '')
  learning[i] = not (configured and configured > 0) and not (heard and heard > 0) and not tonumber(ARGV[9 + i])
end
if learning[1] or learning[2] or learning[3] then
  local factor = 1
  local floor = tonumber(ARGV[25])
  if ARGV[20] == '1' then
    local cut_at = tonumber(redis.call('HGET', state, 'cut_at_grant') or '0')
    if not number or number > cut_at then
      factor = math.max(tonumber(ARGV[23]), floor / math.max(limits[1], floor))
      redis.call('HSET', state, 'cut_at_grant', redis.call('HGET', state, 'grants') or '0')
    end
  elseif ARGV[21] == '1' then
    factor = 1 + tonumber(ARGV[24]) / math.max(limits[1], floor)
  end
  if factor ~= 1 then
    for i = 1, 3 do
      if learning[i] then
        limits[i] = math.min(tonumber(ARGV[5 + i]), limits[i] * factor)
        redis.call('HSET', state, 'learned:' .. dims[i], tostring(limits[i]))
        if factor < 1 then levels[i] = 0 end
        levels[i] = math.min(levels[i], limits[i])
      end
    end
  end
end
for i = 1, 3 do
  local heard = tonumber(ARGV[9 + i])
  if heard and heard > 0 then
    redis.call('HSET', state, 'limit:' .. dims[i], tostring(heard))
    local configured = tonumber(ARGV[2 + i])
    if not (configured and configured > 0) then limits[i] = heard end
  end
  local unused = tonumber(ARGV[16 + i])
  if unused then levels[i] = math.min(limits[i], levels[i] + unused) end
  local remaining = tonumber(ARGV[12 + i])
  if remaining then levels[i] = math.min(levels[i], remaining) end
end
local retry = tonumber(ARGV[16])
if retry and retry > 0 then
  local paused = tonumber(redis.call('HGET', state, 'paused_until') or '0')
  if now + retry > paused then redis.call('HSET', state, 'paused_until', tostring(now + retry)) end
end
save()
return 1
"""
)


def _limit_args(limits: ModelLimits) -> list[float]:
    return [limits.get(d) or 0 for d in DIMENSIONS]


def _optional(value: float | None) -> str:
    return "" if value is None else repr(float(value))


class RedisModelLimiter:
    """The shared limiter every run of the deployment asks (agent.capacity.ModelLimiter)."""

    def __init__(
        self,
        redis: AsyncRedis,
        configured: ModelLimits | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.redis = redis
        self.configured = configured or ModelLimits()
        self.clock = clock
        self._acquire: AsyncScript = redis.register_script(_ACQUIRE)
        self._withdraw: AsyncScript = redis.register_script(_WITHDRAW)
        self._observe: AsyncScript = redis.register_script(_OBSERVE)
        self._waiting_since: dict[str, float] = {}
        self._models_named: set[str] = set()

    def _args(self, model: str) -> list[str | float]:
        return [
            keys.capacity(model),
            repr(self.clock()),
            *_limit_args(self.configured),
            *_limit_args(LEARN_START),
            SERVED_TTL_SECONDS,
        ]

    async def try_acquire(self, demand: Demand) -> float:
        if demand.model not in self._models_named:  # once per model: the gauge finds its queues by it
            await self.redis.sadd(keys.CAPACITY_MODELS, demand.model)
            self._models_named.add(demand.model)
        answer = await self._acquire(
            keys=[keys.capacity(demand.model) + "state"],
            args=[
                *self._args(demand.model),
                demand.ticket,
                demand.team,
                demand.run,
                demand.requests,
                demand.input_tokens,
                demand.output_tokens,
                WAITER_TTL_SECONDS,
            ],
        )
        wait = float(text(answer))
        if wait <= 0:
            since = self._waiting_since.pop(demand.ticket, None)
            metrics().capacity_wait.labels(team=demand.team).observe(
                0.0 if since is None else max(0.0, time.monotonic() - since)
            )
            return 0.0
        self._waiting_since.setdefault(demand.ticket, time.monotonic())
        return min(MAX_POLL_SECONDS, max(MIN_POLL_SECONDS, wait))

    async def withdraw(self, demand: Demand) -> None:
        self._waiting_since.pop(demand.ticket, None)
        await self._withdraw(
            keys=[keys.capacity(demand.model) + "state"], args=[*self._args(demand.model), demand.ticket]
        )

    async def observe(self, model: str, seen: Observed) -> None:
        if seen.retry_after is not None:
            metrics().model_rate_limited.labels(model=model).inc()
        await self._observe(
            keys=[keys.capacity(model) + "state"],
            args=[
                *self._args(model),
                *(_optional(seen.limits.get(d)) for d in DIMENSIONS),
                *(_optional(seen.remaining.get(d)) for d in DIMENSIONS),
                _optional(seen.retry_after),
                *(_optional(seen.unused.get(d)) for d in DIMENSIONS),
                "1" if seen.throttled else "0",
                "1" if seen.answered else "0",
                seen.ticket,
                LEARN_DECREASE,
                LEARN_RAISE_PER_ANSWER,
                LEARN_FLOOR_REQUESTS_PER_MINUTE,
            ],
        )

    async def limits_of(self, model: str) -> tuple[ModelLimits, dict[str, str]]:
        """The limits in force for `model` and where each came from (set, headers or learned)."""
        return limits_in_force(await self.redis.hgetall(keys.capacity(model) + "state"), self.configured)

    async def holding(self, demand: Demand) -> tuple[str, float, str]:
        """The limit `demand` waits for: (dimension, limit, source)."""
        state = await self.redis.hgetall(keys.capacity(demand.model) + "state")
        limits, sources = limits_in_force(state, self.configured)
        fields = {text(k): text(v) for k, v in state.items()}
        in_force = {d: limits.get(d) or 1.0 for d in DIMENSIONS}
        levels = {d: float(fields.get(f"level:{d}") or in_force[d]) for d in DIMENSIONS}
        d = tightest(demand, levels, in_force)
        return d, in_force[d], sources[d]


def limits_in_force(state: Mapping[Any, Any], configured: ModelLimits) -> tuple[ModelLimits, dict[str, str]]:
    """From a model's state hash: the limits the scripts use, and where each came from."""
    fields = {text(k): text(v) for k, v in state.items()}
    limits: dict[str, float] = {}
    sources: dict[str, str] = {}
    for d in DIMENSIONS:
        setting = configured.get(d)
        heard = float(fields.get(f"limit:{d}") or 0)
        learned = float(fields.get(f"learned:{d}") or 0)
        if setting:
            limits[d], sources[d] = setting, SOURCE_SET
        elif heard > 0:
            limits[d], sources[d] = heard, SOURCE_HEADERS
        else:
            limits[d], sources[d] = learned or (LEARN_START.get(d) or 1.0), SOURCE_LEARNED
    return ModelLimits(**limits), sources


def model_limits(redis: Redis, configured: ModelLimits) -> dict[str, tuple[ModelLimits, dict[str, str]]]:
    """Every model's limits in force and their sources (the gauge, doctor; a synchronous client)."""
    return {
        text(model): limits_in_force(
            cast(dict[Any, Any], redis.hgetall(keys.capacity(text(model)) + "state")), configured
        )
        for model in redis.smembers(keys.CAPACITY_MODELS)
    }


def waiting_runs_by_team(redis: Redis) -> dict[str, int]:
    """Runs with a request waiting for capacity, per workspace, over every model (for the gauge;
    a synchronous client: the metrics endpoint reads it from a thread of its own)."""
    counts: dict[str, int] = {}
    for model in redis.smembers(keys.CAPACITY_MODELS):
        prefix = keys.capacity(text(model))
        teams = cast(list[bytes], redis.zrange(prefix + "teams", 0, -1))
        for team in teams:
            name = text(team)
            counts[name] = counts.get(name, 0) + int(redis.zcard(prefix + "runs:" + name))
    return counts
