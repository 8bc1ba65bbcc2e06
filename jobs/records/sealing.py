"""Secrets at rest in Redis: a run's action token is kept encrypted, so a copy of Redis alone holds
no usable token (docs/security.md).

The key is this deployment's DEEPTHREAD_TOKEN_KEY (the installations' Fernet key, the first of a
comma-separated list encrypts, every one decrypts). In single-token mode without that setting the key
is derived from SLACK_BOT_TOKEN (HKDF-SHA256), which serve and the workers both hold and Redis never
does. With neither (no token at all) nothing is sealed and nothing is stored: the run has no action
token, and searching the team's Slack says why. Set once per process at start-up by the CLI
(`configure`), like the key prefix (jobs/keys.py).
"""

from __future__ import annotations

import base64
import logging

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["configure", "derived_key", "open_sealed", "seal", "sealing_enabled"]

log = logging.getLogger(__name__)

# Binds a key derived from the bot token to this one use: it decrypts nothing else.
DERIVATION_INFO = b"deepthread action-token sealing v1"

_fernet: MultiFernet | None = None


def derived_key(secret: str) -> str:
    """A Fernet key derived from a secret that never sits in Redis (the single bot token)."""
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=DERIVATION_INFO).derive(secret.encode())
    return base64.urlsafe_b64encode(raw).decode()


def configure(key: str | None) -> None:
    """This process's sealing key(s): comma-separated Fernet keys, the first encrypts; None: seal nothing."""
    global _fernet
    parts = [part.strip() for part in (key or "").split(",") if part.strip()]
    _fernet = MultiFernet([Fernet(part.encode()) for part in parts]) if parts else None


def sealing_enabled() -> bool:
    return _fernet is not None


def seal(secret: str) -> str | None:
    """The secret encrypted for Redis, or None when this process has no key (then store nothing)."""
    return _fernet.encrypt(secret.encode()).decode() if _fernet is not None else None


def open_sealed(sealed: str) -> str | None:
    """The secret back, or None when it does not open with this key (a changed key: the token is lost,
    which costs only workspace search in that one run)."""
    if _fernet is None:
        return None
    try:
        return _fernet.decrypt(sealed.encode()).decode()
    except InvalidToken:
        log.warning("a stored action token does not decrypt with this process's key; the run searches without it")
        return None
