"""Every Redis key the bot's own records use (the publisher's, the limiter's, the streams'),
in one place; run state's keys are in jobs/keys.py. Each record's lifetime stays with the
module that writes it, next to why."""

from __future__ import annotations

from jobs.keys import PREFIX, team_part

__all__ = [
    "DEFAULT_WORKSPACE",
    "INSTALLATIONS",
    "PUBLISHER_CURSOR",
    "charts",
    "charts_stale",
    "installation",
    "last_sync",
    "legacy_charts",
    "legacy_spill",
    "oauth_state",
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
# Set: the key of every installation record (multi-workspace mode; bot/slack/installations.py).
INSTALLATIONS = f"{PREFIX}:installations"


def installation(enterprise: str, team: str) -> str:
    """String: one installation's bot, its tokens encrypted (`-` for an absent enterprise or team)."""
    return f"{PREFIX}:installation:{enterprise}:{team}"


def oauth_state(nonce: str) -> str:
    """String: an OAuth state this deployment issued, until the install it began comes back (or expires)."""
    return f"{PREFIX}:oauth-state:{nonce}"


def workspace(team: str | None) -> str:
    return team or DEFAULT_WORKSPACE


def charts(team: str | None, channel: str, report_ts: str) -> str:
    """Hash: the chart files a report's thread shows (chart -> file id, permalink, version)."""
    return f"{PREFIX}:charts:{team_part(team)}:{channel}:{report_ts}"


def charts_stale(team: str | None, channel: str, report_ts: str) -> str:
    """Earlier chart versions whose delete failed, retried on the next sync."""
    return f"{charts(team, channel, report_ts)}:stale"


def legacy_charts(channel: str, report_ts: str) -> str:
    """`charts` before keys had a team (moved under it on first read: bot/publishing/thread_files.py)."""
    return f"{PREFIX}:charts:{channel}:{report_ts}"


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


def spill(team: str | None, channel: str, report_ts: str) -> str:
    """Hash: the file holding a report too long for its message (file id, digest, upload time, error)."""
    return f"{PREFIX}:spill:{team_part(team)}:{channel}:{report_ts}"


def spill_stale(team: str | None, channel: str, report_ts: str) -> str:
    """Earlier versions whose delete failed, retried on the next sync."""
    return f"{spill(team, channel, report_ts)}:stale"


def legacy_spill(channel: str, report_ts: str) -> str:
    """`spill` before keys had a team (moved under it on first read)."""
    return f"{PREFIX}:spill:{channel}:{report_ts}"


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
