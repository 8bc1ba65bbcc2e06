"""One Slack rate limiter per workspace and method, shared by every run and every publisher
process through Redis.

Slack limits each Web API method per workspace (chat.update: Tier 3, ~50 a minute), not
per run or per process, so the count lives in Redis: a sliding window of call times per
`deepthread:ratelimit:{team}:{method}`, taken and checked in one Lua script against Redis's
own clock (every process agrees on it). A 429 pauses the bucket for its Retry-After, so
every run in every process backs off together instead of each finding out by itself.
Every Slack write goes through here, by way of the client in slack_client.py.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Mapping

from redis.asyncio import Redis as AsyncRedis

from bot import keys, limits

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60.0  # Slack's tiers are counted per minute
TIER_2_PER_MINUTE = 20  # pins.add, pins.remove
# chat.postMessage has its own limit: about one a second per channel (short bursts allowed).
POST_MESSAGE_PER_CHANNEL_PER_MINUTE = 60


def _ours(per_minute: int) -> int:
    return int(per_minute * limits.RATE_HEADROOM)


# Calls we allow ourselves per window, per workspace: each tier less some headroom. Every Slack
# write we make is listed; a method missing here (a read) is not counted, only its 429s waited out.
CALLS_PER_WINDOW: Mapping[str, int] = {
    "chat.update": _ours(limits.TIER_3_PER_MINUTE),
    "chat.delete": _ours(limits.TIER_3_PER_MINUTE),
    "chat.postMessage": _ours(POST_MESSAGE_PER_CHANNEL_PER_MINUTE),  # per channel, see PER_CHANNEL
    "chat.postEphemeral": _ours(limits.TIER_4_PER_MINUTE),
    "pins.add": _ours(TIER_2_PER_MINUTE),
    "pins.remove": _ours(TIER_2_PER_MINUTE),
    "reactions.add": _ours(limits.TIER_3_PER_MINUTE),
    "reactions.remove": _ours(limits.TIER_3_PER_MINUTE),
    "files.delete": _ours(limits.TIER_3_PER_MINUTE),
    "files.getUploadURLExternal": _ours(limits.TIER_4_PER_MINUTE),
    "files.completeUploadExternal": _ours(limits.TIER_4_PER_MINUTE),
    # Slack does not publish its tier; treat it like the other per-thread writes.
    "assistant.threads.setStatus": _ours(limits.TIER_3_PER_MINUTE),
    # The progress stream (bot/publishing/stream_sync.py): tiers from each method's page.
    "chat.startStream": _ours(limits.TIER_2_PER_MINUTE),
    "chat.appendStream": _ours(limits.TIER_4_PER_MINUTE),
    "chat.stopStream": _ours(limits.TIER_2_PER_MINUTE),
    # The thread as an agent session (bot/publishing/agent_sessions.py): Tier 3, from its page.
    "agents.sessions.setStatus": _ours(limits.TIER_3_PER_MINUTE),
    # The report as a canvas (bot/publishing/canvas_sync.py): create Tier 2, edit and access.set Tier 3.
    "canvases.create": _ours(limits.TIER_2_PER_MINUTE),
    "canvases.edit": _ours(limits.TIER_3_PER_MINUTE),
    "canvases.access.set": _ours(limits.TIER_3_PER_MINUTE),
    # A person's Home tab (bot/desk/home.py): Tier 4, from its page.
    "views.publish": _ours(limits.TIER_4_PER_MINUTE),
    # A read, counted all the same: a burst of sections written at once looks up one id each.
    "canvases.sections.lookup": _ours(limits.TIER_3_PER_MINUTE),
    # A refused install removing the app (bot/surface/oauth.py): Tier 1, once per workspace. No
    # headroom taken: a share of one call is none.
    "apps.uninstall": limits.TIER_1_PER_MINUTE,
}
# A method missing from the table, when a caller counts it anyway, gets the strictest tier we use.
DEFAULT_CALLS_PER_WINDOW = _ours(limits.TIER_3_PER_MINUTE)
# Methods Slack limits per channel rather than per workspace: one bucket per channel.
PER_CHANNEL = frozenset({"chat.postMessage"})
# Share of each window kept for urgent calls (a run's final state), so a busy workspace
# still shows every finished report promptly.
URGENT_SHARE = 0.1
# The methods a final state uses (the publisher's); only these keep slots for urgent calls.
URGENT_METHODS = frozenset(
    {
        "chat.update",
        "assistant.threads.setStatus",
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
        "files.delete",
        "chat.appendStream",  # a streamed run's end state is appended first (Tier 4)…
        "chat.stopStream",  # …then its stream is stopped (Tier 2)
        "agents.sessions.setStatus",  # the session moved on when the run ends
        "canvases.edit",  # the final report's sections
    }
)
# Final states first: calls of these methods a run's final state needs (its progress and
# report messages, and clearing its assistant status). Routine calls leave that many slots
# per run still owed a final state.
FINAL_CALLS_PER_RUN: Mapping[str, int] = {
    "chat.update": 2,
    "assistant.threads.setStatus": 1,
    "agents.sessions.setStatus": 1,
    "chat.appendStream": 1,
}
# However many runs are owed a final state, routine calls (progress) keep this share of the
# window, so no run's progress stops altogether.
ROUTINE_FLOOR_SHARE = 0.1
# Waiters re-check at least this often, so a freed slot is not left idle for long.
MAX_SLEEP_SECONDS = 1.0
# Spread re-checks of many waiters so they do not all hit Redis in the same millisecond.
JITTER_SECONDS = 0.05
# A Retry-After we cannot read is taken as this.
DEFAULT_RETRY_AFTER_SECONDS = 1.0

# Whether a call may use the slots kept for urgent ones: fixed, or asked before every try.
Urgency = bool | Callable[[], Awaitable[bool]]

# Returns 0 when a call was admitted (and counted), else the milliseconds to wait. Routine
# calls leave ARGV[4] slots of the window to urgent ones (a run's final state).
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local paused = tonumber(redis.call('GET', KEYS[2]) or '0')
if paused > now then
  return paused - now
end
local window = tonumber(ARGV[2])
local allowed = tonumber(ARGV[1]) - tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count < allowed then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return 0
end
local frees = redis.call('ZRANGE', KEYS[1], count - allowed, count - allowed, 'WITHSCORES')
return math.max(1, tonumber(frees[2]) + window - now)
"""

# Extends the pause to now + ARGV[1] ms (never shortens one); returns the ms it lasts.
_PAUSE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local target = now + tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if target > current then
  redis.call('SET', KEYS[1], target, 'PX', tonumber(ARGV[1]))
  return tonumber(ARGV[1])
end
return current - now
"""

# The milliseconds a pause has left (0: not paused).
_PAUSED_FOR = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local paused = tonumber(redis.call('GET', KEYS[1]) or '0')
return math.max(0, paused - now)
"""


def bucket_method(method: str, channel: str | None = None) -> str:
    """The bucket a call counts in: the method, or method and channel where Slack counts per channel."""
    return f"{method}:{channel}" if method in PER_CHANNEL and channel else method


def _method_of(bucket: str) -> str:
    return bucket.split(":", 1)[0]


class SlackRateLimiter:
    """`await acquire(team, method)` before each call; `await pause(...)` after a 429.

    `method` may be a bucket from `bucket_method` (a method and its channel). The publisher
    tells it how many runs are still owed a final state (`expect_finals`): routine calls of
    a method in FINAL_CALLS_PER_RUN leave those slots free, so every final state goes out at
    once however busy the workspace was.
    """

    def __init__(
        self,
        redis: AsyncRedis,
        *,
        calls_per_window: Mapping[str, int] | None = None,
        window_seconds: float = WINDOW_SECONDS,
    ) -> None:
        self.redis = redis
        self.calls_per_window = dict(CALLS_PER_WINDOW if calls_per_window is None else calls_per_window)
        if any(cap < 1 for cap in self.calls_per_window.values()) or window_seconds <= 0:
            raise ValueError("every method needs at least one call per window, and the window a length")
        self.window_seconds = window_seconds
        self.window_ms = int(window_seconds * 1000)
        self.finals_owed = 0  # runs (active, or ended but not yet shown) that will need a final state
        self._take = redis.register_script(_TAKE)
        self._pause = redis.register_script(_PAUSE)
        self._paused_for = redis.register_script(_PAUSED_FOR)

    def counts(self, method: str) -> bool:
        """Whether calls of `method` are counted (every write is); others only wait out 429s."""
        return _method_of(method) in self.calls_per_window

    def cap(self, method: str) -> int:
        return self.calls_per_window.get(_method_of(method), DEFAULT_CALLS_PER_WINDOW)

    def expect_finals(self, runs: int) -> None:
        self.finals_owed = max(0, runs)

    def reserve(self, method: str) -> int:
        """Slots of each window routine calls leave to urgent ones (final states)."""
        cap = self.cap(method)
        if cap <= 1 or _method_of(method) not in URGENT_METHODS:
            return 0
        base = max(1, int(cap * URGENT_SHARE))
        finals = FINAL_CALLS_PER_RUN.get(_method_of(method), 0) * self.finals_owed
        floor = max(1, int(cap * ROUTINE_FLOOR_SHARE))
        return min(cap - floor, base + finals) if finals else min(cap - 1, base)

    def routine_share(self, method: str) -> int:
        """Calls per window routine updates of `method` may make now."""
        return self.cap(method) - self.reserve(method)

    async def try_acquire(self, team: str | None, method: str, *, urgent: bool = False) -> float:
        """Take a call slot now if there is one: 0.0, else the seconds until one may free up."""
        wait_ms = await self._take(
            keys=[keys.ratelimit_window(team, method), keys.ratelimit_pause(team, method)],
            args=[self.cap(method), self.window_ms, uuid.uuid4().hex, 0 if urgent else self.reserve(method)],
        )
        return int(wait_ms) / 1000

    async def acquire(self, team: str | None, method: str, *, urgent: Urgency = False) -> float:
        """Wait for a call slot in this workspace's bucket; returns the seconds waited.

        `urgent` may be a check, asked again before every try: a call that becomes urgent
        while it waits (its run just ended) moves ahead of routine calls.
        """
        waited = 0.0
        while True:
            now_urgent = urgent if isinstance(urgent, bool) else await urgent()
            wait = await self.try_acquire(team, method, urgent=now_urgent)
            if wait <= 0:
                return waited
            sleep = min(wait, MAX_SLEEP_SECONDS) + random.uniform(0, JITTER_SECONDS)
            await asyncio.sleep(sleep)
            waited += sleep

    async def pause(self, team: str | None, method: str, seconds: float) -> float:
        """Stop every caller of this workspace's `method` for `seconds` (a 429's Retry-After)."""
        ms = max(1, int(seconds * 1000))
        lasts = int(await self._pause(keys=[keys.ratelimit_pause(team, method)], args=[ms])) / 1000
        log.info(
            "Slack rate-limited %s in workspace %s: every publisher waits %.1f s", method, keys.workspace(team), lasts
        )
        return lasts

    async def paused_for(self, team: str | None, method: str) -> float:
        return int(await self._paused_for(keys=[keys.ratelimit_pause(team, method)], args=[])) / 1000


def retry_after_seconds(headers: object) -> float:
    """Retry-After from a response's headers (any mapping, any header case)."""
    value = None
    getter = getattr(headers, "get", None)
    if getter is not None:
        value = getter("Retry-After") or getter("retry-after")
        if value is None and isinstance(headers, Mapping):
            value = next((v for k, v in headers.items() if str(k).lower() == "retry-after"), None)
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    try:
        return max(0.0, float(value)) if value is not None else DEFAULT_RETRY_AFTER_SECONDS
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER_SECONDS
