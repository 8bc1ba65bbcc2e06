"""The monthly budgets as concurrent runs spend them: each model request reserved before it is sent,
atomically, against what every run of the same budgets has spent and has in flight
(agent/spend_gate.py says why). The one owner of the live spend records:

    deepthread:spend:{team}:live    hash, beside the month's totals (jobs/budgets/spend.py):
                                    run:{id} -> micros reserved or spent by a run not yet recorded,
                                    at:{id} -> when it last reserved, in:{id} -> the budget field it
                                    counts against besides the workspace's (channel:{C}, person:{U})

A run's entries go when its spend is recorded (spend.py's record script, in the same step as the
totals: nothing is counted twice or lost between them), or, for a run that died unrecorded, once
they are LIVE_STALE_SECONDS old. The hash expires LIVE_TTL_SECONDS after its last write.
"""

from __future__ import annotations

from redis.asyncio import Redis as AsyncRedis
from redis.commands.core import AsyncScript

from agent.events import utcnow

from ..keyspace import keys
from ..keyspace.connection import text
from .spend import MICROS, BudgetDefaults, budget_field, configured_defaults, label_of, month_of, usd

__all__ = ["LIVE", "LIVE_STALE_SECONDS", "RedisSpendGate", "live_key"]

LIVE = "live"
# A run longer than this (the deep profile's wall safety is two hours) has died without its spend
# recorded: what it reserved stops counting.
LIVE_STALE_SECONDS = 6 * 3600
LIVE_TTL_SECONDS = 40 * 24 * 3600


def live_key(team: str | None) -> str:
    return keys.spend_month(team, LIVE)


# KEYS: budgets hash, month hash, live hash. ARGV: run id, micros to reserve, now, stale seconds, ttl,
# the run's budget field besides the workspace's ('' none), the workspace default (micros, '' none),
# that field's default ('' none). Returns 'ok', or 'spent\n{field}\n{spent micros}\n{limit micros}'.
_RESERVE = """
local function limit_of(field, default)
  local set = redis.call('HGET', KEYS[1], field)
  if set == 'off' then return nil end
  if set then return tonumber(set) end
  if default ~= '' then return tonumber(default) end
  return nil
end
local run, need, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local caps = {}
local workspace = limit_of('workspace', ARGV[7])
if workspace then caps[#caps + 1] = {'total', 'workspace', workspace} end
if ARGV[6] ~= '' then
  local own = limit_of(ARGV[6], ARGV[8])
  if own then caps[#caps + 1] = {ARGV[6], ARGV[6], own} end
end
if #caps == 0 then return 'ok' end
local live = redis.call('HGETALL', KEYS[3])
local micros, at, scope = {}, {}, {}
for i = 1, #live, 2 do
  local kind, id = string.match(live[i], '^(%a+):(.+)$')
  if kind == 'run' then micros[id] = tonumber(live[i + 1])
  elseif kind == 'at' then at[id] = tonumber(live[i + 1])
  elseif kind == 'in' then scope[id] = live[i + 1] end
end
local total, by_scope = 0, {}
for id, m in pairs(micros) do
  if id ~= run and (at[id] or 0) < now - tonumber(ARGV[4]) then
    redis.call('HDEL', KEYS[3], 'run:' .. id, 'at:' .. id, 'in:' .. id)
  else
    total = total + m
    local s = scope[id] or ''
    by_scope[s] = (by_scope[s] or 0) + m
  end
end
for _, cap in ipairs(caps) do
  local spent = tonumber(redis.call('HGET', KEYS[2], cap[1] .. ':micros') or '0')
  local flying = total
  if cap[1] ~= 'total' then flying = by_scope[cap[1]] or 0 end
  if spent + flying >= cap[3] then
    return 'spent\\n' .. cap[2] .. '\\n' .. tostring(spent + flying) .. '\\n' .. tostring(cap[3])
  end
end
redis.call('HINCRBY', KEYS[3], 'run:' .. run, need)
redis.call('HSET', KEYS[3], 'at:' .. run, tostring(now), 'in:' .. run, ARGV[6])
redis.call('EXPIRE', KEYS[3], ARGV[5])
return 'ok'
"""

# KEYS: live hash. ARGV: run id, micros to add (negative: a reservation larger than the cost), now, ttl.
_SETTLE = """
local left = redis.call('HINCRBY', KEYS[1], 'run:' .. ARGV[1], ARGV[2])
if left < 0 then redis.call('HSET', KEYS[1], 'run:' .. ARGV[1], 0) end
redis.call('HSET', KEYS[1], 'at:' .. ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""


class RedisSpendGate:
    """One run's view of the budgets it counts against (agent.spend_gate.SpendGate)."""

    def __init__(
        self,
        redis: AsyncRedis,
        *,
        team: str | None,
        channel: str | None,
        user: str | None,
        run_id: str,
        defaults: BudgetDefaults | None = None,
    ) -> None:
        self.redis = redis
        self.team, self.run_id = team, run_id
        self.field, self.scope_default = budget_field(channel, user, defaults or configured_defaults())
        self.workspace_default = (defaults or configured_defaults()).workspace_usd
        self._reserve: AsyncScript = redis.register_script(_RESERVE)
        self._settle: AsyncScript = redis.register_script(_SETTLE)

    async def reserve(self, usd_amount: float) -> str | None:
        now = utcnow()
        answer = text(
            await self._reserve(
                keys=[keys.budgets(self.team), keys.spend_month(self.team, month_of(now)), live_key(self.team)],
                args=[
                    self.run_id,
                    max(0, round(usd_amount * MICROS)),
                    now.timestamp(),
                    LIVE_STALE_SECONDS,
                    LIVE_TTL_SECONDS,
                    self.field,
                    _micros(self.workspace_default),
                    _micros(self.scope_default),
                ],
            )
        )
        if answer == "ok":
            return None
        _, field, spent, limit = answer.split("\n")
        return (
            f"the {label_of(field, int(float(limit)))} is spent: {usd(int(float(spent)))} of {usd(int(float(limit)))} "
            f"this month, counting the runs still going, so no further model request was sent"
        )

    async def settle(self, reserved: float, spent: float) -> None:
        delta = round(spent * MICROS) - max(0, round(reserved * MICROS))
        await self._settle(
            keys=[live_key(self.team)], args=[self.run_id, delta, utcnow().timestamp(), LIVE_TTL_SECONDS]
        )


def _micros(value: float | None) -> str:
    return "" if value is None else str(round(value * MICROS))
