"""Redis key names and how long each record lives, in one place so every reader and writer agrees.

Every key starts with the deployment's prefix and research jobs go to its queue: both settings
(DEEPTHREAD_REDIS_PREFIX, DEEPTHREAD_QUEUE), set once at start-up by the CLI with `configure`, so two
deployments can share one Redis without seeing each other's runs. The names below read them when
used: `keys.UPDATES_STREAM` is the current deployment's stream (never copy one into a module-level
name of your own, or it keeps the prefix of the moment it was copied).

Every record belongs to one installation (one Slack workspace). A record named by a run id is the
run's, and a run has one team (`Run.team`); every other record a person can reach by naming
something in Slack (a thread, a message, an event, a month's spend, a budget, a re-check) has the
team in its key, so a channel id shared between workspaces (Slack Connect) or a guessed id never
reaches another workspace's record. Names from before that dimension existed are kept as
`legacy_*` and read once (jobs/tenancy.py moves them under their team).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

DEFAULT_PREFIX = "deepthread"
# What a prefix or a queue name may hold: it becomes part of every key (and RQ's own keys).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")


@dataclass
class _Deployment:
    prefix: str = DEFAULT_PREFIX
    queue: str = DEFAULT_PREFIX


_deployment = _Deployment()


def configure(*, prefix: str = DEFAULT_PREFIX, queue: str | None = None) -> None:
    """This process's deployment: its key prefix and its queue (default: the prefix, so a second
    deployment that sets only a prefix gets a queue of its own too)."""
    for what, value in (("prefix", prefix), ("queue", queue)):
        if value is not None and not NAME.fullmatch(value):
            raise ValueError(f"a Redis {what} is letters, digits and _ . : - (at most 64), not {value!r}")
    _deployment.prefix = prefix
    _deployment.queue = queue or prefix


def prefix() -> str:
    return _deployment.prefix


# Keys of records that are one per deployment (not per run), as names read at each use.
_SHARED = {
    "UPDATES_STREAM": "updates",  # one entry per run-state change: {run_id, version[, epoch]}
    "ACTIVE_RUNS": "runs:active",  # runs not yet finished, re-rendered on publisher start
    "HARD_STOPS": "hard-stops",  # sorted set: run id -> when its stop is forced (epoch s)
    "HARD_STOP_REASONS": "hard-stops:reasons",  # hash: run id -> the reason the forced stop records
    # Sorted set: run id -> when its plan expires (epoch s), for plan-first runs awaiting approval.
    "PLANS_DUE": "plans:due",
    # Sorted set: run id -> when it was created (epoch s), for runs whose messages are not posted yet.
    "UNPOSTED": "runs:unposted",
    "RECHECKS_TO_SHOW": "recheck:to-show",  # re-check runs serve must post at once
    "RECHECK_DIGESTS": "recheck:digests",  # ended re-checks whose digest is owed
    "RECHECK_NOTICES": "recheck:notices",  # skip notices serve says in the thread
    "CAPACITY_MODELS": "capacity:models",  # set: models some run has asked capacity for (jobs/budgets/capacity.py)
    # Pub/sub channel: a run id, published when the run is asked to stop or given more budget
    # (jobs/control/control_listener.py), so a waiting run hears of it without polling.
    "CONTROL_CHANNEL": "control",
    # Retention (jobs/upkeep/retention.py): held by the one process whose turn it is to run the round.
    "RETENTION_LEASE": "retention:lease",
    # Sorted set: run id -> when it was forgotten (epoch s); forgotten again once its job has surely
    # stopped writing, so nothing a stopped run wrote late outlives the forget.
    "FORGOTTEN": "retention:forgotten",
}

if TYPE_CHECKING:  # what the module offers, typed; at run time __getattr__ builds each from the prefix
    PREFIX: str
    QUEUE: str
    UPDATES_STREAM: str
    ACTIVE_RUNS: str
    HARD_STOPS: str
    HARD_STOP_REASONS: str
    PLANS_DUE: str
    UNPOSTED: str
    RECHECKS_TO_SHOW: str
    RECHECK_DIGESTS: str
    RECHECK_NOTICES: str
    CAPACITY_MODELS: str
    CONTROL_CHANNEL: str
    RETENTION_LEASE: str
    FORGOTTEN: str
else:

    def __getattr__(name: str) -> str:
        if name == "PREFIX":
            return _deployment.prefix
        if name == "QUEUE":
            return _deployment.queue
        if name in _SHARED:
            return f"{_deployment.prefix}:{_SHARED[name]}"
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Announcements are small; keep enough for a restarted publisher to catch up.
UPDATES_MAXLEN = 10_000


# Spend is counted per workspace; runs without one (the terminal) are counted under this.
NO_TEAM = "-"


def team_part(team: str | None) -> str:
    """The team dimension of a key: the workspace id, or NO_TEAM for runs without one."""
    return team or NO_TEAM


def spend_run(run_id: str) -> str:
    """String: the run's recorded cost (also its "already recorded" mark)."""
    return f"{_deployment.prefix}:spend:run:{run_id}"


def spend_month(team: str | None, month: str) -> str:
    """Hash: a workspace's month totals, per channel, person and day (`…:runs`: its runs by cost)."""
    return f"{_deployment.prefix}:spend:{team or NO_TEAM}:{month}"


def budgets(team: str | None) -> str:
    """Hash: monthly budgets set by admins (a channel's, the workspace's, or off)."""
    return f"{_deployment.prefix}:budgets:{team or NO_TEAM}"


def workspace_settings(team: str | None) -> str:
    """Hash: settings a workspace's admins chose (`claim_check` → "off"; jobs/records/workspace_settings.py)."""
    return f"{_deployment.prefix}:settings:{team or NO_TEAM}"


def recheck_schedule(team: str | None, channel: str, thread_ts: str) -> str:
    """String: a thread's re-check schedule."""
    return f"{_deployment.prefix}:recheck:{team_part(team)}:{channel}:{thread_ts}"


def legacy_recheck_schedule(channel: str, thread_ts: str) -> str:
    return f"{_deployment.prefix}:recheck:{channel}:{thread_ts}"


def recheck_run(run_id: str) -> str:
    """String: a re-check run's record (what its digest compares against)."""
    return f"{_deployment.prefix}:recheck:run:{run_id}"


def recheck_digest_lease(run_id: str) -> str:
    """String: held while serve posts a re-check's digest."""
    return f"{_deployment.prefix}:recheck:run:{run_id}:posting"


def run(run_id: str) -> str:
    """A run stored whole by earlier versions (read once and moved to the keys below)."""
    return f"{_deployment.prefix}:run:{run_id}"


def run_state(run_id: str) -> str:
    """Hash: the Run record and the run's hot fields (status, version, phase, usage, ...)."""
    return f"{_deployment.prefix}:run:{run_id}:state"


def run_sections(run_id: str) -> str:
    """Hash: section id -> the section with its revisions."""
    return f"{_deployment.prefix}:run:{run_id}:sections"


def run_section_order(run_id: str) -> str:
    """Sorted set: section ids by when each was last written (a rewrite moves it to the end)."""
    return f"{_deployment.prefix}:run:{run_id}:section-order"


def run_sources(run_id: str) -> str:
    """Hash: citation marker -> the source."""
    return f"{_deployment.prefix}:run:{run_id}:sources"


def run_source_order(run_id: str) -> str:
    """List: citation markers in the order they were first added."""
    return f"{_deployment.prefix}:run:{run_id}:source-order"


def run_steps(run_id: str) -> str:
    """List: the run's last progress steps (jobs.records.models.STEPS_KEPT), oldest first, as JSON."""
    return f"{_deployment.prefix}:run:{run_id}:steps"


def thread_runs(team: str | None, channel: str, thread_ts: str) -> str:
    """List: the thread's run ids, oldest first."""
    return f"{_deployment.prefix}:thread:{team_part(team)}:{channel}:{thread_ts}"


def legacy_thread_runs(channel: str, thread_ts: str) -> str:
    return f"{_deployment.prefix}:thread:{channel}:{thread_ts}"


def seen(team: str | None, name: str) -> str:
    """String: a Slack event (or a reply claimed for a continuation) already handled in this workspace."""
    return f"{_deployment.prefix}:seen:{team_part(team)}:{name}"


def dedupe(name: str) -> str:
    """String: a run's own once-only marks (notes, recovery); the run id in `name` names the workspace."""
    return f"{_deployment.prefix}:seen:{name}"


def job_id(run_id: str) -> str:
    return f"run-{run_id}"


def stop(run_id: str) -> str:
    return f"{_deployment.prefix}:run:{run_id}:stop"


def upgrades(run_id: str) -> str:
    return f"{_deployment.prefix}:run:{run_id}:upgrades"


def notes(run_id: str) -> str:
    return f"{_deployment.prefix}:run:{run_id}:notes"


def feedback(run_id: str) -> str:
    """Hash: user id -> their verdict on the run's report (jobs/records/feedback.py)."""
    return f"{_deployment.prefix}:run:{run_id}:feedback"


def plan_drafts(run_id: str) -> str:
    """Counter: plans redrafted for a plan-first run (each a job of its own)."""
    return f"{_deployment.prefix}:run:{run_id}:plan-drafts"


def lock(run_id: str) -> str:
    """String "{epoch}:{token}": the one job holding this run and its fence (jobs/control/ownership.py)."""
    return f"{_deployment.prefix}:run:{run_id}:lock"


def epoch(run_id: str) -> str:
    """Counter: one more for every job that takes the run's lease."""
    return f"{_deployment.prefix}:run:{run_id}:epoch"


def alive(run_id: str) -> str:
    """The running job's last heartbeat (epoch seconds): how far a crashed run got."""
    return f"{_deployment.prefix}:run:{run_id}:alive"


def attempts(run_id: str) -> str:
    return f"{_deployment.prefix}:run:{run_id}:attempts"


def current_job(run_id: str) -> str:
    return f"{_deployment.prefix}:run:{run_id}:job"


def message_run(team: str | None, channel: str, ts: str) -> str:
    """Which run a progress or report message belongs to (for reactions and buttons)."""
    return f"{_deployment.prefix}:message:{team_part(team)}:{channel}:{ts}"


def legacy_message_run(channel: str, ts: str) -> str:
    return f"{_deployment.prefix}:message:{channel}:{ts}"


def thread_profile(team: str | None, channel: str, thread_ts: str) -> str:
    """An upgrade asked for after the thread's run ended applies to the next continuation."""
    return f"{_deployment.prefix}:thread:{team_part(team)}:{channel}:{thread_ts}:profile"


def legacy_thread_profile(channel: str, thread_ts: str) -> str:
    return f"{_deployment.prefix}:thread:{channel}:{thread_ts}:profile"


def posting(run_id: str) -> str:
    """Held while one serve process posts an orphaned run's messages (a lease, so a crash retries)."""
    return f"{_deployment.prefix}:run:{run_id}:posting"


def result(run_id: str, result_id: str) -> str:
    """String: one stored tool result or page text (agent.results.StoredResult as JSON)."""
    return f"{_deployment.prefix}:result:{run_id}:{result_id}"


def action_token(run_id: str) -> str:
    """String: the triggering event's action token (a secret), for as long as Slack honours it."""
    return f"{_deployment.prefix}:run:{run_id}:action-token"


def checkpoint(run_id: str) -> str:
    """Hash: `meta` -> the loop's snapshot, `step:{i}` -> one history step (jobs.records.stores)."""
    return f"{_deployment.prefix}:checkpoint:{run_id}"


def requests(run_id: str) -> str:
    """List: every model request's record, in dispatch order (for `deepthread inspect`)."""
    return f"{_deployment.prefix}:requests:{run_id}"


def request_parts(run_id: str) -> str:
    """Hash: content key -> one part of a request (system, tools, a message), stored once."""
    return f"{_deployment.prefix}:request-parts:{run_id}"


def seen_urls(team: str | None, channel: str, thread_ts: str) -> str:
    """Set: the URLs a thread's runs have seen (normalised), which read_page may fetch; follow-up
    runs inherit them (agent/tools/seen_urls.py, jobs.records.stores.RedisSeenUrls)."""
    return f"{_deployment.prefix}:seen-urls:{team_part(team)}:{channel}:{thread_ts}"


def refused_fetches(run_id: str) -> str:
    """List: the URLs read_page refused to fetch in this run, in order (shown by `deepthread inspect`)."""
    return f"{_deployment.prefix}:refused-fetches:{run_id}"


def file_refusal(team: str | None, version_key: str) -> str:
    """String: why one version of a thread file could not be read (agent FileInfo.version_key),
    so no run downloads and parses it again (jobs.records.stores.RedisFileRefusals)."""
    return f"{_deployment.prefix}:file-refusal:{team_part(team)}:{version_key}"


def library_doc(run_id: str) -> str:
    """Hash: a finished report as the team's library keeps it (jobs/records/library.py): where and by
    whom it was asked, its title, summary, headings and sources, and the words it was indexed under."""
    return f"{_deployment.prefix}:library:run:{run_id}"


def library_term(team: str | None, term: str) -> str:
    """String: one word's postings in a workspace's library, fixed-width records (report number, the
    word's count in it, the report's length), appended as reports are shelved."""
    return f"{_deployment.prefix}:library:{team_part(team)}:term:{term}"


def library_docs(team: str | None) -> str:
    """Hash: a workspace's report numbers -> the run each indexes (the postings name reports by number)."""
    return f"{_deployment.prefix}:library:{team_part(team)}:docs"


def library_stats(team: str | None) -> str:
    """Hash: a workspace's library totals: the next report number and the words of every report (BM25's
    average length)."""
    return f"{_deployment.prefix}:library:{team_part(team)}:stats"


def capacity(model: str) -> str:
    """Prefix of one model's shared capacity records (jobs/budgets/capacity.py lists them)."""
    return f"{_deployment.prefix}:capacity:{model}:"


# --- how long records live ------------------------------------------------------------------
# Results and request logs outlive their run long enough for continuations and `inspect`.
STORED_RESULT_TTL_SECONDS = 30 * 24 * 3600
REQUEST_LOG_TTL_SECONDS = 30 * 24 * 3600
# A thread's seen URLs live as long as its report may be continued.
SEEN_URLS_TTL_SECONDS = 90 * 24 * 3600
# A refused file stays refused as long as a thread's report is kept (a new version is tried afresh).
FILE_REFUSAL_TTL_SECONDS = 90 * 24 * 3600
# A report stays in the library as long as its run (RUN_TTL_SECONDS, jobs/records/store.py), plus this
# grace: a run whose state expired by its TTL is found by the library's sweep while the report still
# says which words to take out of the index.
LIBRARY_GRACE_SECONDS = 7 * 24 * 3600
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
