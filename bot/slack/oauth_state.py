"""The OAuth `state` parameter of Slack's install flow: issued once, signed, consumed once.

`/slack/install` asks for a state before it sends the browser to Slack; `/slack/oauth_redirect`
consumes it when Slack sends the browser back. A state is `{nonce}.{signature}`: the nonce is
kept in Redis for STATE_SECONDS (so any serve process can finish an install another began), and
the signature is an HMAC-SHA256 of it under SLACK_STATE_SECRET, so a state this deployment did not
issue is refused before Redis is asked. Consuming deletes it (GETDEL): a replayed redirect fails.
Bolt also checks that the browser coming back holds the state's cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets

from redis.asyncio import Redis as AsyncRedis
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore

from bot import keys

__all__ = ["STATE_SECONDS", "RedisOAuthStateStore"]

log = logging.getLogger(__name__)

# Slack's default too (OAuthStateUtils): long enough to pick a workspace and approve the scopes.
STATE_SECONDS = 600


class RedisOAuthStateStore(AsyncOAuthStateStore):
    def __init__(self, redis: AsyncRedis, secret: str, *, expiration_seconds: int = STATE_SECONDS) -> None:
        self.redis = redis
        self._secret = secret.encode()
        self.expiration_seconds = expiration_seconds

    @property
    def logger(self) -> logging.Logger:
        return log

    def _sign(self, nonce: str) -> str:
        return hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()

    async def async_issue(self, *args: object, **kwargs: object) -> str:
        nonce = secrets.token_urlsafe(24)
        await self.redis.set(keys.oauth_state(nonce), "1", ex=self.expiration_seconds)
        return f"{nonce}.{self._sign(nonce)}"

    async def async_consume(self, state: str) -> bool:
        nonce, _, signature = (state or "").partition(".")
        if not nonce or not hmac.compare_digest(signature, self._sign(nonce)):
            log.warning("refused an OAuth redirect whose state this deployment did not issue")
            return False
        if await self.redis.getdel(keys.oauth_state(nonce)) is None:
            log.warning("refused an OAuth redirect whose state expired or was already used")
            return False
        return True
