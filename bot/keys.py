"""Every Redis key the bot's own records use (the publisher's, the limiter's, the streams'),
in one place; run state's keys are in jobs/keys.py. Each record's lifetime stays with the
module that writes it, next to why."""

from __future__ import annotations

from jobs.keys import PREFIX

__all__ = [
    "DEFAULT_WORKSPACE",
    "PUBLISHER_CURSOR",
    "charts",
    "charts_stale",
    "last_sync",
    "plan_first",
    "ratelimit_pause",
    "ratelimit_window",
    "rendered",
    "spill",
    "spill_stale",
    "status_lease",
    "status_off",
    "stream",
    "stream_refused",
    "sync_lease",
    "workspace",
]

# Runs without a Slack team id (terminal, tests) share this workspace's records.
DEFAULT_WORKSPACE = "default"
# The last updates-stream id whose runs are all shown in Slack.
PUBLISHER_CURSOR = f"{PREFIX}:publisher:cursor"


def workspace(team: str | None) -> str:
    return team or DEFAULT_WORKSPACE


def charts(channel: str, report_ts: str) -> str:
    return f"{PREFIX}:charts:{channel}:{report_ts}"


def charts_stale(channel: str, report_ts: str) -> str:
    """Earlier chart versions whose delete failed, retried on the next sync."""
    return f"{charts(channel, report_ts)}:stale"


def last_sync(run_id: str) -> str:
    return f"{PREFIX}:publisher:last:{run_id}"


def ratelimit_pause(team: str | None, method: str) -> str:
    return f"{ratelimit_window(team, method)}:pause"


def ratelimit_window(team: str | None, method: str) -> str:
    return f"{PREFIX}:ratelimit:{workspace(team)}:{method}"


def plan_first(team: str | None) -> str:
    """Hash: channel id -> "1" where an admin turned plan first on (bot/desk/plan_first.py)."""
    return f"{PREFIX}:plan-first:{workspace(team)}"


def rendered(run_id: str) -> str:
    return f"{PREFIX}:rendered:{run_id}"


def spill(channel: str, report_ts: str) -> str:
    return f"{PREFIX}:spill:{channel}:{report_ts}"


def spill_stale(channel: str, report_ts: str) -> str:
    """Earlier versions whose delete failed, retried on the next sync."""
    return f"{spill(channel, report_ts)}:stale"


def status_lease(run_id: str) -> str:
    return f"{PREFIX}:publisher:status-lease:{run_id}"


def status_off(team: str | None) -> str:
    return f"{PREFIX}:status:off:{workspace(team)}"


def stream(run_id: str) -> str:
    return f"{PREFIX}:stream:{run_id}"


def stream_refused(team: str | None) -> str:
    return f"{PREFIX}:stream-refused:{workspace(team)}"


def sync_lease(run_id: str) -> str:
    return f"{PREFIX}:publisher:lease:{run_id}"
