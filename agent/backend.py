"""What a run is given from outside: where it keeps what outlives a turn, and how it is steered.

In memory by default (the terminal mode, tests); a worker gives Redis versions (jobs.records.stores,
jobs.control.control, jobs.budgets.capacity) so a crashed run resumes, `deepthread inspect` reads what
happened, and every run of the deployment shares the organization's model limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .capacity import ModelLimiter
from .checkpoint import CheckpointStore
from .context.requestlog import RequestLog
from .control import MemoryControl, RunControl
from .results import FileRefusals, MemoryFileRefusals, MemoryResultStore, ResultStore
from .spend_gate import SpendGate
from .tools.seen_urls import MemorySeenUrls, SeenUrlStore

__all__ = ["RunBackend"]


@dataclass
class RunBackend:
    results: ResultStore = field(default_factory=MemoryResultStore)  # every tool result, by id
    checkpoints: CheckpointStore | None = None  # None: a crash is not resumed
    request_log: RequestLog | None = None  # None: model requests are not logged
    control: RunControl = field(default_factory=MemoryControl)  # stops, upgrades, notes
    refusals: FileRefusals = field(default_factory=MemoryFileRefusals)  # files that could not be read, by version
    seen_urls: SeenUrlStore = field(default_factory=MemorySeenUrls)  # the thread's seen URLs; refused fetches
    # The organization's model capacity shared with other runs (None: this run asks nobody);
    # `team` and `run_id` are who asks, for fair shares between workspaces and runs.
    limiter: ModelLimiter | None = None
    team: str = ""
    run_id: str = ""
    # The monthly budgets this run shares with the other runs of its channel and workspace: each
    # request reserved before it is sent (None: only the run's own cost cap holds it).
    spend_gate: SpendGate | None = None
