"""One writer per run, across publisher processes: leases and the coalescing clock in Redis.

A sync of a run holds `deepthread:publisher:lease:{run}` (renewed while it runs, so only a
dead process lets it lapse): an older rendering can never land after a newer one, whichever
process sends it. A sync that edited a message records when (`deepthread:publisher:last:{run}`,
on Redis's clock) before it lets go, and the next claim waits out the coalescing interval from
there, so the interval holds across processes too. The interval is the caller's at each claim,
so it shrinks at once when the workspace calms; a sync that sent nothing does not count.
"""

from __future__ import annotations

from redis.asyncio import Redis as AsyncRedis

from bot import keys
from jobs.process.background import Stop

__all__ = ["LEASE_SECONDS", "Leases"]

# A run's sync lease; renewed while the sync runs, so only a dead process lets it lapse.
LEASE_SECONDS = 30.0
# When a run's last sync started is remembered this long (longer than any coalescing interval).
LAST_SYNC_TTL_SECONDS = 3600

# Returns 0: leased; -1: another process holds the lease; else the ms until the run may be
# synced again (its last edit was less than ARGV[3] ms ago). ARGV[4] = '1' skips the wait.
_CLAIM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
local interval = tonumber(ARGV[3])
if ARGV[4] ~= '1' then
  local last = tonumber(redis.call('GET', KEYS[2]) or '0')
  if last > 0 and last + interval > now then
    return last + interval - now
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
return 0
"""
# The run's last edit is now (Redis's clock).
_EDITED = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], now, 'PX', tonumber(ARGV[1]))
return now
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class Leases:
    """Leases held under this process's name (`owner`)."""

    def __init__(self, redis: AsyncRedis, owner: str) -> None:
        self.redis = redis
        self.owner = owner
        self._claim = redis.register_script(_CLAIM)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)
        self._edited = redis.register_script(_EDITED)

    async def claim(self, run_id: str, *, interval: float, force: bool) -> float:
        """0.0: leased; -1.0: another process is syncing it; else seconds until it may be synced.
        `force` skips the coalescing interval (a final state goes out at once)."""
        answer = int(
            await self._claim(
                keys=[keys.sync_lease(run_id), keys.last_sync(run_id)],
                args=[self.owner, int(LEASE_SECONDS * 1000), int(interval * 1000), "1" if force else "0"],
            )
        )
        return -1.0 if answer < 0 else answer / 1000

    async def edited(self, run_id: str) -> None:
        """The sync holding the lease edited a message: the coalescing interval starts now."""
        await self._edited(keys=[keys.last_sync(run_id)], args=[LAST_SYNC_TTL_SECONDS * 1000])

    async def keep(self, run_id: str, stop: Stop) -> None:
        """Renew the run's lease until asked to stop (jobs/process/background.py: never cancelled mid-call)."""
        while not await stop.pause(LEASE_SECONDS / 3):
            await self._renew(keys=[keys.sync_lease(run_id)], args=[self.owner, int(LEASE_SECONDS * 1000)])

    async def release(self, key: str) -> None:
        """Let go of a lease (any key set to this owner's name), if it is still ours."""
        await self._release(keys=[key], args=[self.owner])
