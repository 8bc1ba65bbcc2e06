"""Every Redis key the bot's own records use (the publisher's, the limiter's, the streams'),
in one place; run state's keys are in jobs/keyspace/keys.py, whose deployment prefix these share (read at
each use, DEEPTHREAD_REDIS_PREFIX). Each record's lifetime stays with the module that writes it,
next to why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs import keys as _jobs_keys
from jobs.keyspace.keys import team_part

__all__ = [
    "DEFAULT_WORKSPACE",
    "INSTALLATIONS",
    "IDLE_SESSIONS",
    "PUBLISHER_CURSOR",
    "canvas",
    "charts",
    "charts_stale",
    "installation",
    "last_sync",
    "legacy_charts",
    "legacy_spill",
    "oauth_state",
    "plan_first",
    "posts",
    "ratelimit_pause",
    "ratelimit_window",
    "refused",
    "rendered",
    "session",
    "session_lease",
    "spill",
    "spill_stale",
    "status_lease",
    "status_off",
    "stream",
    "stream_refused",
    "sync_lease",
    "thread_log",
    "told_files",
    "workspace",
]

# Runs without a Slack team id (terminal, tests) share this workspace's records.
DEFAULT_WORKSPACE = "default"

if TYPE_CHECKING:
    PUBLISHER_CURSOR: str  # the last updates-stream id whose runs are all shown in Slack
    INSTALLATIONS: str  # Set: the key of every installation record (multi-workspace mode; bot/slack/installations.py)
    IDLE_SESSIONS: str  # Sorted set: threads whose agent session waits for the team, by when it is closed (epoch s)
else:

    def __getattr__(name: str) -> str:  # read at each use: the prefix is a setting (jobs/keyspace/keys.py)
        if name == "PUBLISHER_CURSOR":
            return f"{_jobs_keys.prefix()}:publisher:cursor"
        if name == "INSTALLATIONS":
            return f"{_jobs_keys.prefix()}:installations"
        if name == "IDLE_SESSIONS":
            return f"{_jobs_keys.prefix()}:sessions:idle"
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def installation(enterprise: str, team: str) -> str:
    """String: one installation's bot, its tokens encrypted (`-` for an absent enterprise or team)."""
    return f"{_jobs_keys.prefix()}:installation:{enterprise}:{team}"


def oauth_state(nonce: str) -> str:
    """String: an OAuth state this deployment issued, until the install it began comes back (or expires)."""
    return f"{_jobs_keys.prefix()}:oauth-state:{nonce}"


def workspace(team: str | None) -> str:
    return team or DEFAULT_WORKSPACE


def canvas(team: str | None, channel: str, report_ts: str) -> str:
    """The canvas that holds a pinned report's sections (one per pinned report, like the spilled file)."""
    return f"{_jobs_keys.prefix()}:canvas:{team_part(team)}:{channel}:{report_ts}"


def charts(team: str | None, channel: str, report_ts: str) -> str:
    """Hash: the chart files a report's thread shows (chart -> file id, permalink, version)."""
    return f"{_jobs_keys.prefix()}:charts:{team_part(team)}:{channel}:{report_ts}"


def charts_stale(team: str | None, channel: str, report_ts: str) -> str:
    """Earlier chart versions whose delete failed, retried on the next sync."""
    return f"{charts(team, channel, report_ts)}:stale"


def legacy_charts(channel: str, report_ts: str) -> str:
    """`charts` before keys had a team (moved under it on first read: bot/publishing/thread_files.py)."""
    return f"{_jobs_keys.prefix()}:charts:{channel}:{report_ts}"


def last_sync(run_id: str) -> str:
    return f"{_jobs_keys.prefix()}:publisher:last:{run_id}"


def posts(run_id: str) -> str:
    """Hash: a run's messages as posted: part ("progress", "report") -> "intended", then its ts."""
    return f"{_jobs_keys.prefix()}:posts:{run_id}"


def ratelimit_pause(team: str | None, method: str) -> str:
    return f"{ratelimit_window(team, method)}:pause"


def ratelimit_window(team: str | None, method: str) -> str:
    return f"{_jobs_keys.prefix()}:ratelimit:{workspace(team)}:{method}"


def refused(feature: str, team: str | None) -> str:
    """A workspace that refused an optional Slack feature (bot/publishing/refusals.py)."""
    return f"{_jobs_keys.prefix()}:refused:{feature}:{workspace(team)}"


def plan_first(team: str | None) -> str:
    """Hash: channel id -> "1" where an admin turned plan first on (bot/desk/plan_first.py)."""
    return f"{_jobs_keys.prefix()}:plan-first:{workspace(team)}"


def rendered(run_id: str) -> str:
    return f"{_jobs_keys.prefix()}:rendered:{run_id}"


def session(team: str | None, channel: str, thread_ts: str) -> str:
    """What Slack shows of a thread's agent session (one session per thread, whichever run is in it)."""
    return f"{_jobs_keys.prefix()}:session:{team_part(team)}:{channel}:{thread_ts}"


def session_lease(team: str | None, channel: str, thread_ts: str) -> str:
    return f"{_jobs_keys.prefix()}:publisher:session-lease:{team_part(team)}:{channel}:{thread_ts}"


def spill(team: str | None, channel: str, report_ts: str) -> str:
    """Hash: the file holding a report too long for its message (file id, digest, upload time, error)."""
    return f"{_jobs_keys.prefix()}:spill:{team_part(team)}:{channel}:{report_ts}"


def spill_stale(team: str | None, channel: str, report_ts: str) -> str:
    """Earlier versions whose delete failed, retried on the next sync."""
    return f"{spill(team, channel, report_ts)}:stale"


def legacy_spill(channel: str, report_ts: str) -> str:
    """`spill` before keys had a team (moved under it on first read)."""
    return f"{_jobs_keys.prefix()}:spill:{channel}:{report_ts}"


def status_lease(run_id: str) -> str:
    return f"{_jobs_keys.prefix()}:publisher:status-lease:{run_id}"


def status_off(team: str | None) -> str:
    return f"{_jobs_keys.prefix()}:status:off:{workspace(team)}"


def stream(run_id: str) -> str:
    return f"{_jobs_keys.prefix()}:stream:{run_id}"


def stream_refused(team: str | None) -> str:
    return f"{_jobs_keys.prefix()}:stream-refused:{workspace(team)}"


def sync_lease(run_id: str) -> str:
    return f"{_jobs_keys.prefix()}:publisher:lease:{run_id}"


def told_files(team: str | None, channel: str, thread_ts: str) -> str:
    """Files of a thread the thread was already told the bot cannot open (each said once)."""
    return f"{_jobs_keys.prefix()}:told-files:{team_part(team)}:{channel}:{thread_ts}"


def thread_log(team: str | None, channel: str, thread_ts: str) -> str:
    """Hash: a thread's messages as their events arrived, ts -> the message (distributed apps, whose
    thread reads Slack limits: bot/slack/thread_log.py)."""
    return f"{_jobs_keys.prefix()}:thread-log:{team_part(team)}:{channel}:{thread_ts}"
