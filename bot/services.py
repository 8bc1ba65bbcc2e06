"""What listeners and the publisher share in one bot process."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from redis import Redis

from jobs import AsyncRuns, Runs, RunStore
from jobs.budgets.spend import Spend

from .settings import DEFAULT_STOP_REACTION, StreamConfig
from .text_reader import TextReader

# Slack retries for up to ~5 minutes; remember event ids well past that.
EVENT_DEDUPE_TTL_SECONDS = 24 * 3600


class KeepsMessages(Protocol):
    """Where a thread's messages are kept as their events arrive (bot/slack/thread_log.py's ThreadLog)."""

    def record(self, team: str | None, channel: str, thread_ts: str, event: dict[str, Any]) -> None: ...


@dataclass
class Services:
    redis: Redis  # for the publisher's own records (its digest cache); run state goes through `runs`
    store: RunStore
    bot_user_id: str | None = None
    # The installation's workspace (and Enterprise Grid org): only its own admins are admins here.
    team_id: str | None = None
    enterprise_id: str | None = None
    dms: bool = True  # DEEPTHREAD_DMS: questions are taken in direct messages
    stop_reaction: str = DEFAULT_STOP_REACTION
    admins: frozenset[str] = frozenset()  # DEEPTHREAD_ADMINS: may stop anyone's run
    channels: frozenset[str] = frozenset()  # DEEPTHREAD_CHANNELS: where questions are taken (empty: everywhere)
    streams: StreamConfig = field(default_factory=StreamConfig)  # DEEPTHREAD_PROGRESS and the stream's rollover
    workspace_search: str = "public"  # DEEPTHREAD_WORKSPACE_SEARCH: decides each new run's private_sources
    claim_check: bool = True  # DEEPTHREAD_CLAIM_CHECK: off for the deployment, whatever a workspace chose
    # The only way listeners read or change runs; every call runs off the event loop.
    runs: AsyncRuns = field(init=False)
    # Spend and monthly budgets (sync Redis: listeners call it through asyncio.to_thread).
    spend: Spend = field(init=False)
    # Reads what people write, a long text in a child process: no pattern holds the loop (text_reader.py).
    reader: TextReader = field(default_factory=TextReader)
    # DEEPTHREAD_SLACK_DISTRIBUTED: the messages of our threads as their events arrive (None: not kept).
    thread_log: KeepsMessages | None = None

    def takes_questions_in(self, channel: str | None) -> bool:
        """DEEPTHREAD_CHANNELS (and DEEPTHREAD_DMS for direct messages): where questions, and the
        commands, are answered."""
        if not channel:
            return False
        if channel.startswith("D"):
            return self.dms
        return not self.channels or channel in self.channels

    def __post_init__(self) -> None:
        self.runs = AsyncRuns(Runs(self.store))
        self.spend = Spend(self.redis)
