"""What listeners and the publisher share in one bot process."""
from __future__ import annotations

from dataclasses import dataclass

from redis import Redis

from jobs import RunStore

# Slack retries for up to ~5 minutes; remember event ids well past that.
EVENT_DEDUPE_TTL_SECONDS = 24 * 3600


@dataclass
class Services:
    redis: Redis
    store: RunStore
    bot_user_id: str | None = None
    stop_reaction: str = "octagonal_sign"
    admins: frozenset[str] = frozenset()  # DEEPTHREAD_ADMINS: may stop anyone's run
    channels: frozenset[str] = frozenset()  # DEEPTHREAD_CHANNELS: where questions are taken (empty: everywhere)
