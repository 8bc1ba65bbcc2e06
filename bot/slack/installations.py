"""Installations of the app (multi-workspace mode), kept in Redis with their tokens encrypted.

Bolt's OAuth flow saves each installation here (`async_save`) and its authorize step finds the
bot for every event (`async_find_bot`); the publisher and serve's sweeps look up the token of the
run they act for (`bot_token`, through the client in client.py), and a worker reads its run's
thread with `InstallationTokens` (sync). One record per installation:

    deepthread:installation:{enterprise or -}:{team or -}   JSON: the bot (ids, names, scopes,
                                                             when installed), its tokens encrypted
    deepthread:installations                                 set: every record's key

An org-wide install (Enterprise Grid) is one record for the whole org (team `-`), found by the
enterprise id, as Bolt finds it. Only the bot is kept: the app asks for no user scopes.

Tokens are encrypted with Fernet (AES-128-CBC and HMAC-SHA256) under DEEPTHREAD_TOKEN_KEY, which
may list several keys (comma-separated): the first encrypts, every one decrypts, so a key is
rotated by putting the new one first. The key never leaves the process; nothing here logs a token.
"""

from __future__ import annotations

import logging
import time
from typing import cast

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from pydantic import BaseModel, Field
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore

from bot import keys
from bot.exceptions import TokenKeyMismatch
from jobs.keyspace.connection import text

from .admission import InstallAllowlist
from .tenancy import Tenant

__all__ = ["InstallationTokens", "RedisInstallationStore", "StoredBot", "TokenCipher", "record_key"]

log = logging.getLogger(__name__)

NONE = "-"  # an absent enterprise or team in a record's key


class TokenCipher:
    """DEEPTHREAD_TOKEN_KEY: one Fernet key, or several comma-separated (the first encrypts)."""

    def __init__(self, key: str) -> None:
        parts = [part.strip() for part in key.split(",") if part.strip()]
        if not parts:
            raise ValueError("DEEPTHREAD_TOKEN_KEY is empty")
        try:
            self._fernet = MultiFernet([Fernet(part.encode()) for part in parts])
        except (ValueError, TypeError):
            raise ValueError(
                "DEEPTHREAD_TOKEN_KEY is not a Fernet key (32 url-safe base64 bytes): make one with "
                '`python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`'
            ) from None

    def encrypt(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode()

    def decrypt(self, sealed: str, *, whose: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken:
            raise TokenKeyMismatch(whose) from None


def record_key(enterprise: str | None, team: str | None, enterprise_install: bool | None = False) -> str:
    """The record of an installation: by enterprise alone for an org-wide install, as Bolt looks it up."""
    return keys.installation(enterprise or NONE, NONE if enterprise_install else (team or NONE))


class StoredBot(BaseModel):
    """An installation's bot as stored: everything Bolt's `Bot` holds, the tokens sealed."""

    app_id: str | None = None
    enterprise_id: str | None = None
    enterprise_name: str | None = None
    team_id: str | None = None
    team_name: str | None = None
    bot_id: str | None = None
    bot_user_id: str | None = None
    bot_scopes: list[str] = Field(default_factory=list)
    is_enterprise_install: bool = False
    installed_at: float = Field(default_factory=time.time)
    sealed_bot_token: str
    sealed_refresh_token: str | None = None
    bot_token_expires_at: int | None = None

    @classmethod
    def seal(cls, bot: Bot, cipher: TokenCipher) -> StoredBot:
        assert bot.bot_token, "an installation without a bot token is not stored"
        return cls(
            app_id=bot.app_id,
            enterprise_id=bot.enterprise_id,
            enterprise_name=bot.enterprise_name,
            team_id=bot.team_id,
            team_name=bot.team_name,
            bot_id=bot.bot_id,
            bot_user_id=bot.bot_user_id,
            bot_scopes=list(bot.bot_scopes or []),
            is_enterprise_install=bool(bot.is_enterprise_install),
            installed_at=float(bot.installed_at),
            sealed_bot_token=cipher.encrypt(bot.bot_token),
            sealed_refresh_token=cipher.encrypt(bot.bot_refresh_token) if bot.bot_refresh_token else None,
            bot_token_expires_at=bot.bot_token_expires_at,
        )

    @property
    def key(self) -> str:
        return record_key(self.enterprise_id, self.team_id, self.is_enterprise_install)

    def admitted(self, allowlist: InstallAllowlist) -> bool:
        """Whether DEEPTHREAD_INSTALL_ALLOW, as it is now, admits this installation (it may have been
        saved before the list was set)."""
        return allowlist.admits(self.team_id, self.enterprise_id, org_wide=self.is_enterprise_install)

    def bot(self, cipher: TokenCipher) -> Bot:
        whose = self.key
        return Bot(
            app_id=self.app_id,
            enterprise_id=self.enterprise_id,
            enterprise_name=self.enterprise_name,
            team_id=self.team_id,
            team_name=self.team_name,
            bot_token=cipher.decrypt(self.sealed_bot_token, whose=whose),
            bot_id=self.bot_id or "",
            bot_user_id=self.bot_user_id or "",
            bot_scopes=self.bot_scopes,
            bot_refresh_token=cipher.decrypt(self.sealed_refresh_token, whose=whose)
            if self.sealed_refresh_token
            else None,
            bot_token_expires_at=self.bot_token_expires_at,
            is_enterprise_install=self.is_enterprise_install,
            installed_at=self.installed_at,
        )


def _decode(raw: bytes | str | None) -> StoredBot | None:
    return StoredBot.model_validate_json(raw) if raw else None


class RedisInstallationStore(AsyncInstallationStore):
    """Bolt's installation store (bot-only) in Redis; also the publisher's source of tokens. An
    installation the allowlist does not admit (saved before DEEPTHREAD_INSTALL_ALLOW was set) is found
    by nothing: no event is authorized for it and no call is made with its token."""

    def __init__(self, redis: AsyncRedis, cipher: TokenCipher, allowlist: InstallAllowlist | None = None) -> None:
        self.redis = redis
        self.cipher = cipher
        self.allowlist = allowlist or InstallAllowlist()

    @property
    def logger(self) -> logging.Logger:
        return log

    async def async_save(self, installation: Installation) -> None:
        await self.async_save_bot(installation.to_bot())

    async def async_save_bot(self, bot: Bot) -> None:
        if not bot.bot_token:
            return  # a user-only installation: this app asks for no user scopes
        stored = StoredBot.seal(bot, self.cipher)
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(stored.key, stored.model_dump_json())
        pipe.sadd(keys.INSTALLATIONS, stored.key)
        await pipe.execute()
        where = f"{bot.enterprise_id}/{bot.team_id}" if bot.enterprise_id else bot.team_id
        log.info("installed in %s (%s)%s", where, bot.team_name, " org-wide" if bot.is_enterprise_install else "")

    async def async_find_bot(
        self, *, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None = False
    ) -> Bot | None:
        stored = _decode(await self.redis.get(record_key(enterprise_id, team_id, is_enterprise_install)))
        if stored is None and enterprise_id and not is_enterprise_install:
            # An event from a workspace of an org the app is installed in org-wide.
            stored = _decode(await self.redis.get(record_key(enterprise_id, None, True)))
        if stored is not None and not stored.admitted(self.allowlist):
            _refusing(stored)
            return None
        return stored.bot(self.cipher) if stored else None

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        bot = await self.async_find_bot(
            enterprise_id=enterprise_id, team_id=team_id, is_enterprise_install=is_enterprise_install
        )
        if bot is None or user_id is not None:
            return None  # no user installations are kept
        return Installation(
            app_id=bot.app_id,
            enterprise_id=bot.enterprise_id,
            enterprise_name=bot.enterprise_name,
            team_id=bot.team_id,
            team_name=bot.team_name,
            bot_token=bot.bot_token,
            bot_id=bot.bot_id,
            bot_user_id=bot.bot_user_id,
            bot_scopes=bot.bot_scopes,
            bot_refresh_token=bot.bot_refresh_token,
            bot_token_expires_at=bot.bot_token_expires_at,
            user_id="",  # the installer is not kept: no user token is asked for
            is_enterprise_install=bot.is_enterprise_install,
            installed_at=bot.installed_at,
        )

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        """The workspace's record; with no team, the org's (an org-wide install, removed from the org)."""
        doomed = {record_key(enterprise_id, team_id)}
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(*doomed)
        pipe.srem(keys.INSTALLATIONS, *doomed)
        await pipe.execute()
        log.info("deleted the tokens of %s", ", ".join(sorted(doomed)))

    async def async_delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await self.async_delete_bot(enterprise_id=enterprise_id, team_id=team_id)  # the bot is all there is

    async def async_delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        if user_id is None:
            await self.async_delete_bot(enterprise_id=enterprise_id, team_id=team_id)
        # no user tokens are kept, so a user's revocation deletes nothing

    # --- for the publisher and serve's sweeps ----------------------------------------------

    async def bot_token(self, tenant: Tenant) -> str | None:
        """The bot token of the installation `tenant` belongs to; None once it is uninstalled."""
        bot = await self.async_find_bot(
            enterprise_id=tenant.enterprise, team_id=tenant.team, is_enterprise_install=tenant.enterprise_install
        )
        return bot.bot_token if bot else None

    async def refused(self) -> list[StoredBot]:
        """The installations the allowlist does not admit (saved before it was set)."""
        return [stored for stored in await self.installed() if not stored.admitted(self.allowlist)]

    async def installed(self) -> list[StoredBot]:
        """Every installation (tokens still sealed): what serve says at start-up."""
        found = []
        for raw_key in await self.redis.smembers(keys.INSTALLATIONS):
            stored = _decode(await self.redis.get(text(raw_key)))
            if stored is not None:
                found.append(stored)
        return found


class InstallationTokens:
    """The same records read synchronously: a worker's run reads its thread with its installation's token
    (none for an installation the allowlist does not admit)."""

    def __init__(self, redis: Redis, cipher: TokenCipher, allowlist: InstallAllowlist | None = None) -> None:
        self.redis = redis
        self.cipher = cipher
        self.allowlist = allowlist or InstallAllowlist()

    def bot_token(self, tenant: Tenant) -> str | None:
        raw = self.redis.get(record_key(tenant.enterprise, tenant.team, tenant.enterprise_install))
        if raw is None and tenant.enterprise and not tenant.enterprise_install:
            raw = self.redis.get(record_key(tenant.enterprise, None, True))
        stored = _decode(cast(bytes | None, raw))
        if stored is None:
            return None
        if not stored.admitted(self.allowlist):
            _refusing(stored)
            return None
        return stored.bot(self.cipher).bot_token


_told: set[str] = set()  # installations this process has said it refuses (said once each)


def _refusing(stored: StoredBot) -> None:
    if stored.key not in _told:
        _told.add(stored.key)
        log.warning(
            "refused to act for %s: not in DEEPTHREAD_INSTALL_ALLOW (installed before the list was set)",
            f"{stored.enterprise_id}/{stored.team_id}" if stored.enterprise_id else stored.team_id,
        )
