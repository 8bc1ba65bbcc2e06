"""Redis key names, in one place so every reader and writer agrees."""

from __future__ import annotations

PREFIX = "deepthread"
QUEUE = "deepthread"
UPDATES_STREAM = f"{PREFIX}:updates"  # one entry per run-state change: {run_id, version}
ACTIVE_RUNS = f"{PREFIX}:runs:active"  # runs not yet finished, re-rendered on publisher start
# Announcements are small; keep enough for a restarted publisher to catch up.
UPDATES_MAXLEN = 10_000
HARD_STOPS = f"{PREFIX}:hard-stops"  # sorted set: run id -> when its stop is forced (epoch s)
HARD_STOP_REASONS = f"{PREFIX}:hard-stops:reasons"  # hash: run id -> the reason the forced stop records
# Sorted set: run id -> when it was created (epoch s), for runs whose messages are not posted yet.
UNPOSTED = f"{PREFIX}:runs:unposted"


def run(run_id: str) -> str:
    """A run stored whole by earlier versions (read once and moved to the keys below)."""
    return f"{PREFIX}:run:{run_id}"


def run_state(run_id: str) -> str:
    """Hash: the Run record and the run's hot fields (status, version, phase, usage, ...)."""
    return f"{PREFIX}:run:{run_id}:state"


def run_sections(run_id: str) -> str:
    """Hash: section id -> the section with its revisions."""
    return f"{PREFIX}:run:{run_id}:sections"


def run_section_order(run_id: str) -> str:
    """Sorted set: section ids by when each was last written (a rewrite moves it to the end)."""
    return f"{PREFIX}:run:{run_id}:section-order"


def run_sources(run_id: str) -> str:
    """Hash: citation marker -> the source."""
    return f"{PREFIX}:run:{run_id}:sources"


def run_source_order(run_id: str) -> str:
    """List: citation markers in the order they were first added."""
    return f"{PREFIX}:run:{run_id}:source-order"


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


def posting(run_id: str) -> str:
    """Held while one serve process posts an orphaned run's messages (a lease, so a crash retries)."""
    return f"{PREFIX}:run:{run_id}:posting"
