"""What a run is given from outside: where it keeps what outlives a turn, and how it is steered.

In memory by default (the terminal mode, tests); a worker gives Redis versions (jobs.stores,
jobs.control) so a crashed run resumes and `deepthread inspect` reads what happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .checkpoint import CheckpointStore
from .context.requestlog import RequestLog
from .control import MemoryControl, RunControl
from .results import FileRefusals, MemoryFileRefusals, MemoryResultStore, ResultStore
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
