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


def stop(run_id: str) -> str:
    return f"{PREFIX}:run:{run_id}:stop"


def upgrades(run_id: str) -> str:
    return f"{PREFIX}:run:{run_id}:upgrades"


def notes(run_id: str) -> str:
    return f"{PREFIX}:run:{run_id}:notes"


def lock(run_id: str) -> str:
    """Held by the one job running this run; refreshed by its heartbeat."""
    return f"{PREFIX}:run:{run_id}:lock"


def alive(run_id: str) -> str:
    """The running job's last heartbeat (epoch seconds): how far a crashed run got."""
    return f"{PREFIX}:run:{run_id}:alive"


def attempts(run_id: str) -> str:
    return f"{PREFIX}:run:{run_id}:attempts"


def current_job(run_id: str) -> str:
    return f"{PREFIX}:run:{run_id}:job"


def message_run(channel: str, ts: str) -> str:
    """Which run a progress or report message belongs to (for reactions and buttons)."""
    return f"{PREFIX}:message:{channel}:{ts}"


def thread_profile(channel: str, thread_ts: str) -> str:
    """An upgrade asked for after the thread's run ended applies to the next continuation."""
    return f"{PREFIX}:thread:{channel}:{thread_ts}:profile"
