"""Redis key names and how long each record lives, in one place so every reader and writer agrees."""

from __future__ import annotations

PREFIX = "deepthread"
QUEUE = "deepthread"
UPDATES_STREAM = f"{PREFIX}:updates"  # one entry per run-state change: {run_id, version}
ACTIVE_RUNS = f"{PREFIX}:runs:active"  # runs not yet finished, re-rendered on publisher start
# Announcements are small; keep enough for a restarted publisher to catch up.
UPDATES_MAXLEN = 10_000
HARD_STOPS = f"{PREFIX}:hard-stops"  # sorted set: run id -> when its stop is forced (epoch s)
HARD_STOP_REASONS = f"{PREFIX}:hard-stops:reasons"  # hash: run id -> the reason the forced stop records
# Sorted set: run id -> when its plan expires (epoch s), for plan-first runs awaiting approval.
PLANS_DUE = f"{PREFIX}:plans:due"
# Sorted set: run id -> when it was created (epoch s), for runs whose messages are not posted yet.
UNPOSTED = f"{PREFIX}:runs:unposted"


# Spend is counted per workspace; runs without one (the terminal) are counted under this.
NO_TEAM = "-"


def spend_run(run_id: str) -> str:
    """String: the run's recorded cost (also its "already recorded" mark)."""
    return f"{PREFIX}:spend:run:{run_id}"


def spend_month(team: str | None, month: str) -> str:
    """Hash: a workspace's month totals, per channel, person and day (`…:runs`: its runs by cost)."""
    return f"{PREFIX}:spend:{team or NO_TEAM}:{month}"


def budgets(team: str | None) -> str:
    """Hash: monthly budgets set by admins (a channel's, the workspace's, or off)."""
    return f"{PREFIX}:budgets:{team or NO_TEAM}"


def recheck_schedule(channel: str, thread_ts: str) -> str:
    """String: a thread's re-check schedule."""
    return f"{PREFIX}:recheck:{channel}:{thread_ts}"


def recheck_run(run_id: str) -> str:
    """String: a re-check run's record (what its digest compares against)."""
    return f"{PREFIX}:recheck:run:{run_id}"


def recheck_digest_lease(run_id: str) -> str:
    """String: held while serve posts a re-check's digest."""
    return f"{PREFIX}:recheck:run:{run_id}:posting"


RECHECKS_TO_SHOW = f"{PREFIX}:recheck:to-show"  # re-check runs serve must post at once
RECHECK_DIGESTS = f"{PREFIX}:recheck:digests"  # ended re-checks whose digest is owed
RECHECK_NOTICES = f"{PREFIX}:recheck:notices"  # skip notices serve says in the thread


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


def plan_drafts(run_id: str) -> str:
    """Counter: plans redrafted for a plan-first run (each a job of its own)."""
    return f"{PREFIX}:run:{run_id}:plan-drafts"


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


def result(run_id: str, result_id: str) -> str:
    """String: one stored tool result or page text (agent.results.StoredResult as JSON)."""
    return f"{PREFIX}:result:{run_id}:{result_id}"


def action_token(run_id: str) -> str:
    """String: the triggering event's action token (a secret), for as long as Slack honours it."""
    return f"{PREFIX}:run:{run_id}:action-token"


def checkpoint(run_id: str) -> str:
    """Hash: `meta` -> the loop's snapshot, `step:{i}` -> one history step (jobs.stores)."""
    return f"{PREFIX}:checkpoint:{run_id}"


def requests(run_id: str) -> str:
    """List: every model request's record, in dispatch order (for `deepthread inspect`)."""
    return f"{PREFIX}:requests:{run_id}"


def request_parts(run_id: str) -> str:
    """Hash: content key -> one part of a request (system, tools, a message), stored once."""
    return f"{PREFIX}:request-parts:{run_id}"


# --- how long records live ------------------------------------------------------------------
# Results and request logs outlive their run long enough for continuations and `inspect`.
STORED_RESULT_TTL_SECONDS = 30 * 24 * 3600
REQUEST_LOG_TTL_SECONDS = 30 * 24 * 3600
# A checkpoint only matters until the run ends or its retries give up.
CHECKPOINT_TTL_SECONDS = 7 * 24 * 3600
# Stops, upgrades and notes for a run, its heartbeat and its current job: a week covers the
# longest run with its retries.
CONTROL_TTL_SECONDS = 7 * 24 * 3600
RUN_ALIVE_TTL_SECONDS = 7 * 24 * 3600
CURRENT_JOB_TTL_SECONDS = 7 * 24 * 3600
# Slack's action tokens are short-lived ("ephemeral"; the docs give no figure): kept no longer than
# a run's first quarter hour, after which search_workspace says the permission has run out.
ACTION_TOKEN_TTL_SECONDS = 15 * 60
# RQ's own record of a finished or failed job (the run's outcome is in run state, not here).
JOB_RESULT_TTL_SECONDS = 24 * 3600
