"""What listeners and the publisher share in one bot process."""

from __future__ import annotations

from dataclasses import dataclass, field

from redis import Redis

from jobs import AsyncRuns, Runs, RunStore
from jobs.spend import Spend

from .settings import DEFAULT_STOP_REACTION, StreamConfig

# Slack retries for up to ~5 minutes; remember event ids well past that.
EVENT_DEDUPE_TTL_SECONDS = 24 * 3600


@dataclass
class Services:
    redis: Redis  # for the publisher's own records (its digest cache); run state goes through `runs`
    store: RunStore
    bot_user_id: str | None = None
    stop_reaction: str = DEFAULT_STOP_REACTION
    admins: frozenset[str] = frozenset()  # DEEPTHREAD_ADMINS: may stop anyone's run
    channels: frozenset[str] = frozenset()  # DEEPTHREAD_CHANNELS: where questions are taken (empty: everywhere)
    streams: StreamConfig = field(default_factory=StreamConfig)  # DEEPTHREAD_PROGRESS and the stream's rollover
    workspace_search: str = "public"  # DEEPTHREAD_WORKSPACE_SEARCH: decides each new run's private_sources
    # The only way listeners read or change runs; every call runs off the event loop.
    runs: AsyncRuns = field(init=False)
    # Spend and monthly budgets (sync Redis: listeners call it through asyncio.to_thread).
    spend: Spend = field(init=False)

    def __post_init__(self) -> None:
        self.runs = AsyncRuns(Runs(self.store))
        self.spend = Spend(self.redis)
