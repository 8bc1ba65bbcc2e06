"""The organization's model capacity in Redis: one fair queue for every worker's runs.

The same rules as the engine's in-memory limiter (agent/capacity.py), as Lua scripts so each
decision is atomic on the server: token buckets per model for requests, input tokens and
output tokens per minute (limits from the operator, else from the service's
`anthropic-ratelimit-*` headers held within a factor of the limit in force, else learned:
agent/capacity_learning.py), refilled continuously; waiting requests granted in round-robin order
between workspaces, then between a workspace's runs, then first come first served within a run.
No answer pauses the others: a 429's `retry-after` is its own request's wait (agent/capacity_middleware.py),
and a demand larger than a whole minute of a named limit is answered `inf` (its run is told).

Keys, per model (`deepthread:capacity:{model}:…`; all under the deployment's prefix):

    state           hash: bucket levels, when they were refilled, the limits the headers gave, the
                    learned limits and their ceiling, the answer count, the grant sequence; it
                    expires STATE_TTL_SECONDS after the model's last request (limits are relearned)
    teams           sorted set: workspaces with waiting requests, by when each was last served
    runs:{team}     sorted set: that workspace's runs with waiting requests, by when last served
    queue:{run}     sorted set: the run's waiting tickets, in arrival order
    tickets         hash: ticket -> its demand (team, run, requests, input, output tokens)
    seen            sorted set: ticket -> when its waiter last asked (a silent one is dropped)
    granted         sorted set: tickets granted but not yet collected, by when
    never           sorted set: tickets larger than a named limit, until their waiter hears so
    grant_numbers   hash: ticket -> its grant's number, until answered (a throttled answer to a
                    request granted before the last cut of a learned limit does not cut again)
    served:{t|r}:…  string: when a workspace or run that left the queue was last served, so
                    coming back does not put it first (kept an hour)

Keys are built inside the scripts from one prefix: a single Redis (or a Sentinel-managed
primary), as everywhere in this deployment; Redis Cluster is not a target (DESIGN.md §4).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.commands.core import AsyncScript

from agent.capacity import (
    DIMENSIONS,
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
from agent.capacity_learning import (
    LEARN_BINDING_SHARE,
    LEARN_CUTS_PER_REQUEST,
    LEARN_DECREASE,
    LEARN_DESCENT,
    LEARN_FLOOR_REQUESTS_PER_MINUTE,
    LEARN_GAP_SHARE,
    LEARN_NEAR,
    LEARN_PROBE_PER_ANSWER,
    LEARN_RAISE_PER_ANSWER,
)
from agent.provider_values import LIMIT_FACTOR, MIN_LIMITS

from ..keyspace import keys
from ..keyspace.connection import text
from ..process.metrics import metrics

__all__ = ["DIMENSIONS", "RedisModelLimiter", "limits_in_force", "model_limits", "waiting_runs_by_team"]

SERVED_TTL_SECONDS = 3600
# A model's limits, heard or learned, are kept this long after its last request: a deployment idle
# for a day relearns them (a few throttled answers), and nothing a provider once said lasts for ever.
STATE_TTL_SECONDS = 24 * 3600

# Shared by the scripts: ARGV[1] prefix, ARGV[2] now, ARGV[3..5] configured limits (0: unset),
# ARGV[6..8] the learned limits' start, ARGV[9] served ttl, ARGV[10] state ttl. Defines `limits`,
# `known` (set or heard: a demand past it can never go), `levels` (refilled to now) and `save()`.
_PRELUDE = """
local p = ARGV[1]
local now = tonumber(ARGV[2])
local dims = {'requests', 'input_tokens', 'output_tokens'}
local state = p .. 'state'
local limits, levels, known = {}, {}, {}
local at = tonumber(redis.call('HGET', state, 'at') or '')
for i = 1, 3 do
  local configured = tonumber(ARGV[2 + i])
  local heard = tonumber(redis.call('HGET', state, 'limit:' .. dims[i]) or '')
  local learned = tonumber(redis.call('HGET', state, 'learned:' .. dims[i]) or '')
  known[i] = true
  if configured and configured > 0 then limits[i] = configured
  elseif heard and heard > 0 then limits[i] = heard
  else
    known[i] = false
    if learned and learned > 0 then limits[i] = learned else limits[i] = tonumber(ARGV[5 + i]) end
  end
  local level = tonumber(redis.call('HGET', state, 'level:' .. dims[i]) or '')
  if level == nil then level = limits[i] end
  if at then level = math.min(limits[i], level + math.max(0, now - at) * limits[i] / 60) end
  levels[i] = level
end
local function save()
  redis.call('HSET', state, 'at', tostring(now))
  for i = 1, 3 do redis.call('HSET', state, 'level:' .. dims[i], tostring(levels[i])) end
  redis.call('EXPIRE', state, ARGV[10])
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

# ARGV[11] ticket, [12] team, [13] run, [14..16] need, [17] waiter ttl, [18] how soon to ask
# again while a probe is out (after a learned limit's cut, one request at a time until an answer).
# Returns the seconds to wait as a string ('0': granted, 'inf': it can never be granted).
_ACQUIRE = (
    _PRELUDE
    + """
local ticket, team, run = ARGV[11], ARGV[12], ARGV[13]
local waiter_ttl = tonumber(ARGV[17])
redis.call('ZREMRANGEBYSCORE', p .. 'granted', '-inf', now - waiter_ttl)
if redis.call('ZREM', p .. 'granted', ticket) == 1 then save() return '0' end
if redis.call('ZREM', p .. 'never', ticket) == 1 then save() return 'inf' end
redis.call('ZADD', p .. 'seen', now, ticket)
if redis.call('HSETNX', p .. 'tickets', ticket, team .. '\\n' .. run .. '\\n' .. ARGV[14] .. '\\n' .. ARGV[15] .. '\\n' .. ARGV[16]) == 1 then
  redis.call('ZADD', p .. 'queue:' .. run, redis.call('HINCRBY', state, 'qseq', 1), ticket)
  if not redis.call('ZSCORE', p .. 'runs:' .. team, run) then
    redis.call('ZADD', p .. 'runs:' .. team, tonumber(redis.call('GET', p .. 'served:r:' .. run) or '0'), run)
  end
  if not redis.call('ZSCORE', p .. 'teams', team) then
    redis.call('ZADD', p .. 'teams', tonumber(redis.call('GET', p .. 'served:t:' .. team) or '0'), team)
  end
end
local wait = 0
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
        local short, never = 0, false
        for i = 1, 3 do
          local n, level, limit = need[i], levels[i], limits[i]
          if n > limit and known[i] then never = true
          elseif not (n <= level or (n > limit and level >= limit)) then
            short = math.max(short, (math.min(n, limit) - level) / (limit / 60))
          end
        end
        local probe = redis.call('HGET', state, 'probe')
        local probing = probe and probe ~= '' and now - tonumber(redis.call('HGET', state, 'probe_at') or '0') < waiter_ttl
        if never then
          leave(t, r, head, false)
          redis.call('ZADD', p .. 'never', now, head)
          redis.call('ZREMRANGEBYSCORE', p .. 'never', '-inf', now - waiter_ttl)
        elseif short > 0 then
          wait = short
          break
        elseif probing then
          wait = tonumber(ARGV[18])
          break
        else
          local cut_at = redis.call('HGET', state, 'cut_at_grant')
          if cut_at and cut_at ~= '0' and redis.call('HGET', state, 'answers_at_cut') == (redis.call('HGET', state, 'answers') or '0') then
            redis.call('HSET', state, 'probe', head, 'probe_at', tostring(now))
          end
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
if redis.call('ZREM', p .. 'never', ticket) == 1 then return 'inf' end
return tostring(math.max(wait, 0.001))
"""
)

# ARGV[11] ticket: leaves the queue (or gives back a grant it will not use).
_WITHDRAW = (
    _PRELUDE
    + """
local ticket = ARGV[11]
redis.call('ZREM', p .. 'granted', ticket)
redis.call('ZREM', p .. 'never', ticket)
redis.call('HDEL', p .. 'grant_numbers', ticket)
if redis.call('HGET', state, 'probe') == ticket then redis.call('HDEL', state, 'probe') end
local demand = redis.call('HGET', p .. 'tickets', ticket)
if demand then
  local parts = {}
  for part in string.gmatch(demand, '[^\\n]+') do parts[#parts + 1] = part end
  leave(parts[1], parts[2], ticket, false)
end
return 1
"""
)

# ARGV[11..13] limits heard ('' unknown), [14..16] remaining heard ('' unknown), [17..19] reserved but
# unused (a failed request's tokens, given back; '' none), [20] throttled ('1'), [21] answered ('1'),
# [22] the answer's ticket, [23] how many times its request was throttled before,
# [24..26] the smallest limits heard, [27] the factor a heard limit moves by at most, [28..35] the
# learning rule's constants, [36] the cuts one request may make, [37] the answer count at its
# request's previous throttle
# (agent/capacity_learning.py; MemoryModelLimiter._learn is the same rule).
# Learned limits move first. Returns the answer count.
_OBSERVE = (
    _PRELUDE
    + """
local number = tonumber(redis.call('HGET', p .. 'grant_numbers', ARGV[22]) or '')
redis.call('HDEL', p .. 'grant_numbers', ARGV[22])
local answers = tonumber(redis.call('HGET', state, 'answers') or '0')
if ARGV[21] == '1' then answers = redis.call('HINCRBY', state, 'answers', 1) end
if ARGV[21] == '1' or redis.call('HGET', state, 'probe') == ARGV[22] then redis.call('HDEL', state, 'probe') end
local learning = {}
for i = 1, 3 do learning[i] = not known[i] and not tonumber(ARGV[10 + i]) end
if learning[1] or learning[2] or learning[3] then
  local decrease, descent, near, gap_share = tonumber(ARGV[28]), tonumber(ARGV[29]), tonumber(ARGV[30]), tonumber(ARGV[31])
  local probe, raise, binding, floor = tonumber(ARGV[32]), tonumber(ARGV[33]), tonumber(ARGV[34]), tonumber(ARGV[35])
  local before = limits[1]
  local ceiling = tonumber(redis.call('HGET', state, 'ceiling') or '0')
  local after, cut = before, false
  local fill = 1
  for i = 1, 3 do if learning[i] then fill = math.min(fill, levels[i] / limits[i]) end end
  if ARGV[20] == '1' then
    local cut_at = tonumber(redis.call('HGET', state, 'cut_at_grant') or '0')
    local attempt = tonumber(ARGV[23])
    if (not number or number > cut_at) and (attempt == 0 or (attempt < tonumber(ARGV[36]) and answers <= tonumber(ARGV[37]))) then
      local at_cut = tonumber(redis.call('HGET', state, 'answers_at_cut') or '0')
      local factor = decrease
      if answers == at_cut then factor = descent end
      after, ceiling, cut = math.max(floor, before * factor), before, true
      redis.call('HSET', state, 'cut_at_grant', redis.call('HGET', state, 'grants') or '0')
      redis.call('HSET', state, 'answers_at_cut', tostring(answers))
      redis.call('HSET', state, 'ceiling', tostring(ceiling))
    end
  elseif ARGV[21] == '1' and fill < binding then
    local target = ceiling * near
    if before < target then after = before + math.max(probe, (target - before) * gap_share)
    elseif ceiling > 0 then after = before + probe
    else after = before + raise end
  end
  if after ~= before then
    local factor = after / before
    for i = 1, 3 do
      if learning[i] then
        limits[i] = math.min(tonumber(ARGV[5 + i]), limits[i] * factor)
        redis.call('HSET', state, 'learned:' .. dims[i], tostring(limits[i]))
        if cut then levels[i] = 0 end
        levels[i] = math.min(levels[i], limits[i])
      end
    end
  end
end
local span = tonumber(ARGV[27])
for i = 1, 3 do
  local configured = tonumber(ARGV[2 + i])
  local heard = tonumber(ARGV[10 + i])
  if heard and heard > 0 and not (configured and configured > 0) then
    heard = math.max(heard, tonumber(ARGV[23 + i]))
    heard = math.min(math.max(heard, limits[i] / span), limits[i] * span)
    redis.call('HSET', state, 'limit:' .. dims[i], tostring(heard))
    limits[i] = heard
  end
  local unused = tonumber(ARGV[16 + i])
  if unused and not (ARGV[20] == '1' and not known[i]) then levels[i] = math.min(limits[i], levels[i] + unused) end
  local remaining = tonumber(ARGV[13 + i])
  if remaining then levels[i] = math.min(levels[i], remaining) end
end
save()
return answers
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
            STATE_TTL_SECONDS,
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
                MAX_POLL_SECONDS,
            ],
        )
        wait = float(text(answer))
        if wait == math.inf:
            self._waiting_since.pop(demand.ticket, None)
            return math.inf
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

    async def observe(self, model: str, seen: Observed) -> int:
        if seen.throttled:
            metrics().model_rate_limited.labels(model=model).inc()
        answers = await self._observe(
            keys=[keys.capacity(model) + "state"],
            args=[
                *self._args(model),
                *(_optional(seen.limits.get(d)) for d in DIMENSIONS),
                *(_optional(seen.remaining.get(d)) for d in DIMENSIONS),
                *(_optional(seen.unused.get(d)) for d in DIMENSIONS),
                "1" if seen.throttled else "0",
                "1" if seen.answered else "0",
                seen.ticket,
                seen.attempt,
                *(MIN_LIMITS[d] for d in DIMENSIONS),
                LIMIT_FACTOR,
                LEARN_DECREASE,
                LEARN_DESCENT,
                LEARN_NEAR,
                LEARN_GAP_SHARE,
                LEARN_PROBE_PER_ANSWER,
                LEARN_RAISE_PER_ANSWER,
                LEARN_BINDING_SHARE,
                LEARN_FLOOR_REQUESTS_PER_MINUTE,
                LEARN_CUTS_PER_REQUEST,
                seen.since,
            ],
        )
        return int(answers)

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
