"""The OAuth `state` parameter of Slack's install flow: issued once, signed, consumed once, bounded.

`/slack/install` asks for a state before it sends the browser to Slack; `/slack/oauth_redirect`
consumes it when Slack sends the browser back. A state is `{nonce}.{signature}`: the nonce is kept
in Redis for STATE_SECONDS (so any serve process can finish an install another began), and the
signature is an HMAC-SHA256 of it under SLACK_STATE_SECRET, so a state this deployment did not
issue is refused before Redis is asked. Consuming removes it: a replayed redirect fails. Bolt also
checks that the browser coming back holds the state's cookie.

Anyone who can reach the bot's URL can open `/slack/install`, and each visit issues a state. So the
states in flight are one sorted set (nonce by expiry, keys.OAUTH_STATES) holding at most
MAX_PENDING_STATES: a visit past that is refused (`InstallsBusy`, a 429 page) until some expire, and
Redis holds one bounded key whatever the traffic. Each client's visits are limited before this
(bot/surface/install_limits.py), so one client cannot fill it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time

from redis.asyncio import Redis as AsyncRedis
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore

from bot import keys

__all__ = ["MAX_PENDING_STATES", "STATE_SECONDS", "InstallsBusy", "RedisOAuthStateStore"]

log = logging.getLogger(__name__)

# Long enough to sign in to Slack, pick a workspace and approve the scopes; an abandoned flow's
# state goes soon after (Slack's own default is ten minutes).
STATE_SECONDS = 300
# Install flows in progress at once, across the deployment: far more than people ever start, and
# a bound on what unauthenticated visits can make Redis hold.
MAX_PENDING_STATES = 1_000

# Expired states out, then a new one in unless the set is full; the key lives as long as its
# newest state. Redis's clock, so every serve replica judges expiry alike.
_ISSUE = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], t + tonumber(ARGV[1]), ARGV[3])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]) + 1)
return 1
"""
# Good once, and only before it expires.
_CONSUME = """
local expires = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expires then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
local now = redis.call('TIME')
return tonumber(expires) > tonumber(now[1]) + tonumber(now[2]) / 1000000 and 1 or 0
"""


class InstallsBusy(Exception):
    """MAX_PENDING_STATES install flows are in progress: no state is issued until some expire."""


class RedisOAuthStateStore(AsyncOAuthStateStore):
    def __init__(
        self,
        redis: AsyncRedis,
        secret: str,
        *,
        expiration_seconds: int = STATE_SECONDS,
        max_pending: int = MAX_PENDING_STATES,
    ) -> None:
        self.redis = redis
        self._secret = secret.encode()
        self.expiration_seconds = expiration_seconds
        self.max_pending = max_pending
        self._warned = -float("inf")

    @property
    def logger(self) -> logging.Logger:
        return log

    def _sign(self, nonce: str) -> str:
        return hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()

    async def async_issue(self, *args: object, **kwargs: object) -> str:
        nonce = secrets.token_urlsafe(24)
        issued = await self.redis.eval(_ISSUE, 1, keys.OAUTH_STATES, self.expiration_seconds, self.max_pending, nonce)
        if not issued:
            if time.monotonic() - self._warned >= self.expiration_seconds:  # once a while, not per visit
                self._warned = time.monotonic()
                log.warning("refused to begin installs: %d install flows are in progress", self.max_pending)
            raise InstallsBusy()
        return f"{nonce}.{self._sign(nonce)}"

    async def async_consume(self, state: str) -> bool:
        nonce, _, signature = (state or "").partition(".")
        if not nonce or not hmac.compare_digest(signature, self._sign(nonce)):
            log.warning("refused an OAuth redirect whose state this deployment did not issue")
            return False
        if not await self.redis.eval(_CONSUME, 1, keys.OAUTH_STATES, nonce):
            log.warning("refused an OAuth redirect whose state expired or was already used")
            return False
        return True
