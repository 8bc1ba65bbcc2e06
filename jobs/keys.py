"""Redis key names, in one place so every reader and writer agrees."""
from __future__ import annotations

PREFIX = "deepthread"
QUEUE = "deepthread"
UPDATES_STREAM = f"{PREFIX}:updates"  # one entry per run-state change: {run_id, version}
ACTIVE_RUNS = f"{PREFIX}:runs:active"  # runs not yet finished, re-rendered on publisher start
# Announcements are small; keep enough for a restarted publisher to catch up.
UPDATES_MAXLEN = 10_000


def run(run_id: str) -> str:
    return f"{PREFIX}:run:{run_id}"


def thread_runs(channel: str, thread_ts: str) -> str:
    return f"{PREFIX}:thread:{channel}:{thread_ts}"


def dedupe(name: str) -> str:
    return f"{PREFIX}:seen:{name}"


def job_id(run_id: str) -> str:
    return f"run-{run_id}"
