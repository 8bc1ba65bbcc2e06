"""One Slack rate limiter per workspace and method, shared by every run and every publisher
process through Redis.

Slack limits each Web API method per workspace (chat.update: Tier 3, ~50 a minute), not
per run or per process, so the count lives in Redis: a sliding window of call times per
`deepthread:ratelimit:{team}:{method}`, taken and checked in one Lua script against Redis's
own clock (every process agrees on it). A 429 pauses the bucket for its Retry-After, so
every run in every process backs off together instead of each finding out by itself.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from redis.asyncio import Redis as AsyncRedis
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from jobs.keys import PREFIX

from . import limits

log = logging.getLogger(__name__)

DEFAULT_BUCKET = "default"  # runs without a Slack team id share this workspace bucket
WINDOW_SECONDS = 60.0  # Slack's tiers are counted per minute
# Calls we allow ourselves per window, per workspace: each tier less some headroom.
CALLS_PER_WINDOW: Mapping[str, int] = {
    "chat.update": int(limits.TIER_3_PER_MINUTE * limits.RATE_HEADROOM),
    "files.delete": int(limits.TIER_3_PER_MINUTE * limits.RATE_HEADROOM),
    "files.getUploadURLExternal": int(limits.TIER_4_PER_MINUTE * limits.RATE_HEADROOM),
    "files.completeUploadExternal": int(limits.TIER_4_PER_MINUTE * limits.RATE_HEADROOM),
    # Slack does not publish its tier; treat it like the other per-thread writes.
    "assistant.threads.setStatus": int(limits.TIER_3_PER_MINUTE * limits.RATE_HEADROOM),
}
# A method missing from CALLS_PER_WINDOW gets the strictest tier we use.
DEFAULT_CALLS_PER_WINDOW = int(limits.TIER_3_PER_MINUTE * limits.RATE_HEADROOM)
# Share of each window kept for urgent calls (a run's final state), so a busy workspace
# still shows every finished report promptly.
URGENT_SHARE = 0.1
# Waiters re-check at least this often, so a freed slot is not left idle for long.
MAX_SLEEP_SECONDS = 1.0
# Spread re-checks of many waiters so they do not all hit Redis in the same millisecond.
JITTER_SECONDS = 0.05
# A Retry-After we cannot read is taken as this.
DEFAULT_RETRY_AFTER_SECONDS = 1.0
# A call rate-limited this many times in a row is given up (the publisher retries it later).
MAX_429_RETRIES = 3

T = TypeVar("T")
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


def bucket_of(team: str | None) -> str:
    return team or DEFAULT_BUCKET


def window_key(team: str | None, method: str) -> str:
    return f"{PREFIX}:ratelimit:{bucket_of(team)}:{method}"


def pause_key(team: str | None, method: str) -> str:
    return f"{window_key(team, method)}:pause"


class SlackRateLimiter:
    """`await acquire(team, method)` before each call; `await pause(...)` after a 429."""

    def __init__(self, redis: AsyncRedis, *, calls_per_window: Mapping[str, int] | None = None,
                 window_seconds: float = WINDOW_SECONDS) -> None:
        self.redis = redis
        self.calls_per_window = dict(CALLS_PER_WINDOW if calls_per_window is None else calls_per_window)
        if any(cap < 1 for cap in self.calls_per_window.values()) or window_seconds <= 0:
            raise ValueError("every method needs at least one call per window, and the window a length")
        self.window_ms = int(window_seconds * 1000)
        self._take = redis.register_script(_TAKE)
        self._pause = redis.register_script(_PAUSE)
        self._paused_for = redis.register_script(_PAUSED_FOR)

    def cap(self, method: str) -> int:
        return self.calls_per_window.get(method, DEFAULT_CALLS_PER_WINDOW)

    def reserve(self, method: str) -> int:
        cap = self.cap(method)
        return min(cap - 1, max(1, int(cap * URGENT_SHARE))) if cap > 1 else 0

    async def try_acquire(self, team: str | None, method: str, *, urgent: bool = False) -> float:
        """Take a call slot now if there is one: 0.0, else the seconds until one may free up."""
        wait_ms = await self._take(keys=[window_key(team, method), pause_key(team, method)],
                                   args=[self.cap(method), self.window_ms, uuid.uuid4().hex,
                                         0 if urgent else self.reserve(method)])
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
        lasts = int(await self._pause(keys=[pause_key(team, method)], args=[ms])) / 1000
        log.info("Slack rate-limited %s in workspace %s: every publisher waits %.1f s", method,
                 bucket_of(team), lasts)
        return lasts

    async def paused_for(self, team: str | None, method: str) -> float:
        return int(await self._paused_for(keys=[pause_key(team, method)], args=[])) / 1000


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


class LimitedSlack:
    """Slack calls that go through the shared limiter.

    Each call waits for a slot in its workspace's bucket of every method it makes; a 429
    pauses those buckets for Retry-After (for every process) and the call tries again, up
    to `max_429_retries` times. Without a limiter, calls go straight to the client (whose
    own retry handlers then deal with 429s): the benchmark's baseline.
    """

    def __init__(self, client: AsyncWebClient, limiter: SlackRateLimiter | None,
                 max_429_retries: int = MAX_429_RETRIES) -> None:
        if limiter is not None:
            # The limiter handles 429s for everyone; the SDK's handler would wait for this call alone.
            client = copy.copy(client)
            client.retry_handlers = [h for h in client.retry_handlers
                                     if not isinstance(h, AsyncRateLimitErrorRetryHandler)]
        self.client = client
        self.limiter = limiter
        self.max_429_retries = max_429_retries

    async def call(self, team: str | None, methods: str | tuple[str, ...], fn: Callable[[], Awaitable[T]], *,
                   urgent: Urgency = False) -> T:
        """`await fn()` once a slot is free in every bucket it uses. `urgent` calls may use the
        slots routine ones leave free."""
        names = (methods,) if isinstance(methods, str) else methods
        attempt = 0
        while True:
            if self.limiter is not None:
                for method in names:
                    await self.limiter.acquire(team, method, urgent=urgent)
            try:
                return await fn()
            except SlackApiError as exc:
                if self.limiter is None or exc.response.status_code != 429 or attempt >= self.max_429_retries:
                    raise
                attempt += 1
                seconds = retry_after_seconds(exc.response.headers)
                for method in names:
                    await self.limiter.pause(team, method, seconds)
