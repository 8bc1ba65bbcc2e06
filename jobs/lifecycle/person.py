"""One person's runs in one workspace, as their Home tab shows them: the ones still going (from the
active set) and the latest finished (from the month's spend records, this month's and last), with
what they spent this month. Read only: each record stays its owner's (records/store.py, budgets/spend.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from pydantic import BaseModel, Field
from redis import Redis

from agent import utcnow

from ..budgets.spend import RunSpend, month_of
from ..keyspace import keys
from ..keyspace.connection import text
from ..records.models import Run, RunStatus

__all__ = ["ActiveRun", "PersonRuns", "person_runs"]

# Runs listed per kind: a Home tab to glance at, not an archive (`usage` and the library have more).
SHOWN = 10
# Spend records of a month read at most to find one person's: a busy workspace's month.
MONTH_RUNS_READ = 5000


class ActiveRun(BaseModel):
    run: Run
    status: RunStatus


class PersonRuns(BaseModel):
    active: list[ActiveRun] = Field(default_factory=list)
    recent: list[RunSpend] = Field(default_factory=list)  # finished, newest first
    spent_micros: int = 0  # this month
    runs: int = 0  # finished this month


def _active(redis: Redis, team: str | None, user: str) -> list[ActiveRun]:
    ids = sorted(text(i) for i in cast(set[bytes], redis.smembers(keys.ACTIVE_RUNS)))
    pipe = redis.pipeline(transaction=False)
    for run_id in ids:
        pipe.hmget(keys.run_state(run_id), ["run", "status"])
    found = []
    for raw, status in pipe.execute():
        if not raw or not status:
            continue
        run = Run.model_validate_json(raw)
        if run.team == team and run.requester == user and not RunStatus(text(status)).finished:
            found.append(ActiveRun(run=run, status=RunStatus(text(status))))
    return sorted(found, key=lambda a: a.run.created_at, reverse=True)[:SHOWN]


def _recent(redis: Redis, team: str | None, user: str, months: list[str]) -> list[RunSpend]:
    found: list[RunSpend] = []
    for month in months:
        ids = cast(list[bytes], redis.zrange(keys.spend_month(team, month) + ":runs", 0, MONTH_RUNS_READ - 1))
        pipe = redis.pipeline(transaction=False)
        for run_id in ids:
            pipe.get(keys.spend_run(text(run_id)))
        for raw in pipe.execute():
            if raw:
                spent = RunSpend.model_validate_json(raw)
                if spent.user == user:
                    found.append(spent)
        if len(found) >= SHOWN:
            break
    return sorted(found, key=lambda s: s.finished_at, reverse=True)[:SHOWN]


def person_runs(redis: Redis, team: str | None, user: str) -> PersonRuns:
    """`user`'s runs in workspace `team`: still going, the latest finished, and this month's spend."""
    now = utcnow()
    this_month = month_of(now)
    last_month = month_of(now.replace(day=1) - timedelta(days=1))
    spent = redis.hmget(keys.spend_month(team, this_month), [f"user:{user}:micros", f"user:{user}:runs"])
    return PersonRuns(
        active=_active(redis, team, user),
        recent=_recent(redis, team, user, [this_month, last_month]),
        spent_micros=int(text(spent[0])) if spent[0] else 0,
        runs=int(text(spent[1])) if spent[1] else 0,
    )
