"""Scheduled re-checks of a thread's report: the schedule (one per thread, in Redis), the RQ job
that starts each re-check as a continuation run, and what serve is asked to post about them.

A schedule is enqueued with RQ's own scheduler (`Queue.enqueue_at`; workers run with the
scheduler on). Each scheduled job carries the schedule's token: a schedule that was replaced
or switched off leaves its old job finding another token (or none), so it does nothing, even
if deleting that job raced with the scheduler moving it to the queue.

Workers never call Slack. The job records what serve must show, and serve's re-check sweep
(bot/desk/recheck.py) posts it within seconds:

    deepthread:recheck:{team}:{channel}:{thread_ts}   the thread's Schedule (JSON)
    deepthread:recheck:to-show                 sorted set: re-check runs to post at once
    deepthread:recheck:digests                 sorted set: re-check runs whose digest is owed
    deepthread:recheck:run:{run_id}            the RecheckRun (what the digest compares against)
    deepthread:recheck:notices                 list: ThreadNotice lines to say in a thread
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import cast

from pydantic import BaseModel
from redis import Redis
from rq import Queue, get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import Job

from agent.events import utcnow
from agent.prompts import load

from ..budgets.spend import Spend
from ..exceptions import RunNotFound, ThreadMoved
from ..keyspace import keys
from ..keyspace.connection import text
from ..lifecycle.runs import Runs
from ..records.continuation import create_successor, successor
from ..records.models import RunState, RunStatus
from ..records.store import RUN_TTL_SECONDS, RunStore

__all__ = [
    "MAX_DELAY_SECONDS",
    "MIN_REPEAT_SECONDS",
    "WEEK_SECONDS",
    "RecheckRun",
    "Rechecks",
    "Schedule",
    "ThreadNotice",
    "recheck_request",
    "run_recheck",
    "verified",
]

log = logging.getLogger(__name__)

DAY_SECONDS = 24 * 3600
WEEK_SECONDS = 7 * DAY_SECONDS
# A repeating re-check costs a run each time: no more often than daily.
MIN_REPEAT_SECONDS = DAY_SECONDS
# Runs live RUN_TTL_SECONDS after their last write: a check further out could find the report gone.
MAX_DELAY_SECONDS = 60 * DAY_SECONDS
# A single check that was skipped (budget) or failed is tried again after its own delay, but not
# sooner than this: budgets reset monthly, and a retry loop would only repeat the refusal.
RETRY_AT_LEAST_SECONDS = DAY_SECONDS
# A run is still going in the thread when a check falls due: the check waits this long.
BUSY_RETRY_SECONDS = 15 * 60
# The job only records and enqueues; the research runs as a run of its own.
JOB_TIMEOUT_SECONDS = 120
# serve posts a due digest once: another serve process may try after this long if the first died.
DIGEST_LEASE_SECONDS = 60
# Read per sweep: a backlog is posted over a few sweeps.
MAX_PER_SWEEP = 20


def job_id_for(token: str) -> str:
    return f"recheck-{token}"


class Schedule(BaseModel):
    """A thread's re-check: repeating (`every_seconds`) or a single check (`every_seconds` None)."""

    channel: str
    thread_ts: str
    team: str | None = None
    every_seconds: int | None = None
    delay_seconds: int  # the wait asked for: a single check's delay, a repeating one's interval
    next_at: datetime | None  # None: a single check is running now (its outcome decides what follows)
    token: str  # the scheduled job's token; a job holding another token is stale
    set_by: str | None = None  # who asked: the re-check runs are theirs
    set_at: datetime

    @property
    def repeating(self) -> bool:
        return self.every_seconds is not None

    def retry_seconds(self) -> int:
        return self.every_seconds or max(self.delay_seconds, RETRY_AT_LEAST_SECONDS)


class RecheckRun(BaseModel):
    """A re-check run, and the run whose report it re-checks (the digest's 'before')."""

    run_id: str
    parent_run_id: str
    team: str | None = None
    channel: str
    thread_ts: str
    since: datetime  # when the thread's last run ended: "No changes since …"


class ThreadNotice(BaseModel):
    """A line serve says in a thread on a worker's behalf (workers never call Slack), with the
    installation whose thread it is (serve says it with that installation's token)."""

    team: str | None = None
    enterprise: str | None = None
    enterprise_install: bool = False
    channel: str
    thread_ts: str
    text: str


def recheck_request(last_run: datetime) -> str:
    """The fixed brief a re-check continues the thread with (agent/prompts/recheck.md)."""
    return load("recheck").replace("{last_run}", f"{last_run:%-d %b %Y}").strip()


def _budget_reached(redis: Redis, team: str | None, channel: str) -> str | None:
    """Which monthly budget stops a re-check ("the channel's budget"), or None to go ahead."""
    spend = Spend(redis)
    if spend.cap_refusal(team, channel) is None:
        return None
    reached = next((cap for cap in spend.caps(team, channel) if cap.reached), None)
    return f"the {reached.scope}'s budget" if reached else "the budget"


BudgetCheck = Callable[[Redis, "str | None", str], "str | None"]


class Rechecks:
    """The one owner of re-check records; sync (workers, tests), wrapped by the bot in threads."""

    def __init__(self, redis: Redis, *, budget_reached: BudgetCheck = _budget_reached) -> None:
        self.redis = redis
        self.store = RunStore(redis)
        self.runs = Runs(self.store)
        self.queue = Queue(keys.QUEUE, connection=redis)
        self.budget_reached = budget_reached

    # --- the schedule ------------------------------------------------------------------

    def get(self, team: str | None, channel: str, thread_ts: str) -> Schedule | None:
        """The thread's schedule in this workspace (one saved before keys had a team, when it is this team's)."""
        raw = self.redis.get(keys.recheck_schedule(team, channel, thread_ts))
        if raw is None:
            legacy = self.redis.get(keys.legacy_recheck_schedule(channel, thread_ts))
            schedule = Schedule.model_validate_json(legacy) if legacy else None
            if schedule is not None and (team is None or keys.team_part(schedule.team) == keys.team_part(team)):
                return schedule
            return None
        return Schedule.model_validate_json(raw)

    def set(
        self, team: str | None, channel: str, thread_ts: str, *, seconds: int, repeat: bool, set_by: str | None
    ) -> tuple[Schedule, bool]:
        """Schedule the thread's re-check, replacing any earlier one; (schedule, replaced)."""
        old = self.get(team, channel, thread_ts)
        if old is not None:
            self._delete_job(old.token)
        schedule = Schedule(
            channel=channel,
            thread_ts=thread_ts,
            team=team,
            every_seconds=seconds if repeat else None,
            delay_seconds=seconds,
            next_at=None,
            token="",
            set_by=set_by,
            set_at=utcnow(),
        )
        return self._plan(schedule, seconds), old is not None

    def cancel(self, team: str | None, channel: str, thread_ts: str) -> Schedule | None:
        """Switch the thread's re-checks off; the schedule that was set, if any."""
        old = self.get(team, channel, thread_ts)
        if old is None:
            return None
        self._forget(old)
        self._delete_job(old.token)
        self._show_next_check(team, channel, thread_ts, None)
        return old

    def _forget(self, schedule: Schedule) -> None:
        self.redis.delete(
            keys.recheck_schedule(schedule.team, schedule.channel, schedule.thread_ts),
            keys.legacy_recheck_schedule(schedule.channel, schedule.thread_ts),
        )

    def _plan(self, schedule: Schedule, seconds: int) -> Schedule:
        """Enqueue the next check `seconds` from now with a fresh token, and save the schedule."""
        token = uuid.uuid4().hex
        when = utcnow() + timedelta(seconds=seconds)
        schedule = schedule.model_copy(update={"token": token, "next_at": when})
        self._save(schedule)  # saved first: the job, however soon it runs, finds its own token
        self.queue.enqueue_at(
            when,
            run_recheck,
            schedule.channel,
            schedule.thread_ts,
            token,
            schedule.team,
            job_id=job_id_for(token),
            job_timeout=JOB_TIMEOUT_SECONDS,
            result_ttl=keys.JOB_RESULT_TTL_SECONDS,
            failure_ttl=keys.JOB_RESULT_TTL_SECONDS,
            description=f"re-check of thread {schedule.channel}/{schedule.thread_ts}",
        )
        self._show_next_check(schedule.team, schedule.channel, schedule.thread_ts, when)
        return schedule

    def _save(self, schedule: Schedule) -> None:
        # Outlives its next check by the runs' own lifetime; a repeating schedule is saved again each time.
        ttl = int(((schedule.next_at or utcnow()) - utcnow()).total_seconds()) + RUN_TTL_SECONDS
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(
            keys.recheck_schedule(schedule.team, schedule.channel, schedule.thread_ts),
            schedule.model_dump_json(),
            ex=max(ttl, 1),
        )
        pipe.delete(keys.legacy_recheck_schedule(schedule.channel, schedule.thread_ts))  # moved under its team
        pipe.execute()

    def _delete_job(self, token: str) -> None:
        try:
            Job.fetch(job_id_for(token), connection=self.redis).delete()
        except NoSuchJobError:
            pass  # already ran, or expired

    def _show_next_check(self, team: str | None, channel: str, thread_ts: str, when: datetime | None) -> None:
        """The report footer shows the next check: it renders the thread's latest run."""
        latest = self.store.thread_run_ids(team, channel, thread_ts)
        if latest:
            try:
                self.store.set_next_check(latest[-1], when)
            except RunNotFound:
                pass  # the thread's runs expired; the check will find nothing and end the schedule

    # --- the scheduled job ---------------------------------------------------------------

    def start(self, team: str | None, channel: str, thread_ts: str, token: str) -> str:
        """A check fell due: start the re-check run (or say why not) and plan the next one.
        Returns what happened, for RQ's job result and the worker log. `team` is None for a job
        planned before keys had a team: its schedule names the team."""
        schedule = self.get(team, channel, thread_ts)
        if schedule is None or schedule.token != token:
            return "replaced"  # switched off or replaced since this job was planned
        team = schedule.team
        ids = self.store.thread_run_ids(team, channel, thread_ts)
        try:
            parent = self.store.get(ids[-1]) if ids else None
        except RunNotFound:
            parent = None
        if parent is None:
            self._forget(schedule)
            return "gone"  # the thread's report expired: nothing left to re-check
        if not parent.status.finished:
            self._plan(schedule, BUSY_RETRY_SECONDS)  # the run in progress checks fresh sources anyway
            return "busy"
        budget = self.budget_reached(self.redis, schedule.team, channel)
        if budget:
            planned = self._plan(schedule, schedule.retry_seconds())
            self._say_skipped(planned, parent, f"{budget} is reached")
            return "over budget"
        if not self.store.claim_event(team, job_id_for(token), keys.JOB_RESULT_TTL_SECONDS):
            return "already started"  # this job ran before (a duplicate delivery)
        since = parent.finished_at or parent.updated_at
        run = successor(self.store, parent, recheck_request(since), schedule.set_by).model_copy(
            update={"recheck": True}
        )
        # Listed as not shown before it is stored, as every run is (Runs.start): if this job dies
        # in between, the orphan sweep still posts it.
        self.redis.zadd(keys.UNPOSTED, {run.id: run.created_at.timestamp()})
        try:
            create_successor(self.store, parent, run)
        except ThreadMoved:
            # A reply started a run a moment ago: the fixed brief must not become its note; later.
            self.redis.zrem(keys.UNPOSTED, run.id)
            self._plan(schedule, BUSY_RETRY_SECONDS)
            return "busy"
        self._record(
            RecheckRun(
                run_id=run.id,
                parent_run_id=parent.run.id,
                team=team,
                channel=channel,
                thread_ts=thread_ts,
                since=since,
            )
        )
        self.runs.launch(run)
        if schedule.every_seconds:
            self._plan(schedule, schedule.every_seconds)
        else:
            # A single check: what follows depends on how it ends (`ended`).
            self._save(schedule.model_copy(update={"next_at": None}))
            self._show_next_check(team, channel, thread_ts, None)
        return f"started run {run.id}"

    def _record(self, recheck: RecheckRun) -> None:
        now = utcnow().timestamp()
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(keys.recheck_run(recheck.run_id), recheck.model_dump_json(), ex=RUN_TTL_SECONDS)
        pipe.zadd(keys.RECHECKS_TO_SHOW, {recheck.run_id: now})  # serve posts it at once, not after the orphan grace
        pipe.zadd(keys.RECHECK_DIGESTS, {recheck.run_id: now})
        pipe.execute()

    def _say_skipped(self, schedule: Schedule, parent: RunState, why: str) -> None:
        self.say(parent, f"Re-check skipped: {why}; {next_check_words(schedule)}.")

    def say(self, latest: RunState, line: str) -> None:
        """A line for serve to say in the thread of `latest` (a run of that thread)."""
        run = latest.run
        notice = ThreadNotice(
            team=run.team,
            enterprise=run.enterprise,
            enterprise_install=run.enterprise_install,
            channel=run.channel or "",
            thread_ts=run.thread_ts or "",
            text=line,
        )
        self.redis.rpush(keys.RECHECK_NOTICES, notice.model_dump_json())

    # --- what serve posts ----------------------------------------------------------------

    def runs_to_show(self) -> list[RunState]:
        """Re-check runs not shown in Slack yet (serve posts them, then calls `shown`)."""
        found = []
        for raw in cast(list[bytes], self.redis.zrange(keys.RECHECKS_TO_SHOW, 0, MAX_PER_SWEEP - 1)):
            run_id = text(raw)
            try:
                found.append(self.store.get(run_id))
            except RunNotFound:
                self.redis.zrem(keys.RECHECKS_TO_SHOW, run_id)
        return found

    def shown(self, run_id: str) -> None:
        self.redis.zrem(keys.RECHECKS_TO_SHOW, run_id)

    def take_notices(self) -> list[ThreadNotice]:
        """Lines to say, each taken once (a serve that dies right after taking one loses it)."""
        taken = []
        for _ in range(MAX_PER_SWEEP):
            raw = self.redis.lpop(keys.RECHECK_NOTICES)
            if raw is None:
                break
            taken.append(ThreadNotice.model_validate_json(cast(bytes, raw)))
        return taken

    def digests_due(self) -> list[tuple[RecheckRun, RunState, RunState]]:
        """Ended re-check runs whose digest this caller claimed: (recheck, parent, run).
        A run not yet shown waits, so the digest follows the run's own messages."""
        due = []
        for raw in cast(list[bytes], self.redis.zrange(keys.RECHECK_DIGESTS, 0, MAX_PER_SWEEP - 1)):
            run_id = text(raw)
            # One field read per running re-check and sweep; the whole state only once it ended.
            status = self.redis.hget(keys.run_state(run_id), "status")
            recorded = self.redis.get(keys.recheck_run(run_id))
            if status is None or recorded is None:
                self.redis.zrem(keys.RECHECK_DIGESTS, run_id)  # expired
                continue
            if not RunStatus(text(status)).finished or self.redis.zscore(keys.RECHECKS_TO_SHOW, run_id) is not None:
                continue
            if not self.redis.set(keys.recheck_digest_lease(run_id), "1", nx=True, ex=DIGEST_LEASE_SECONDS):
                continue  # another serve process is posting it
            recheck = RecheckRun.model_validate_json(recorded)
            try:
                due.append((recheck, self.store.get(recheck.parent_run_id), self.store.get(run_id)))
            except RunNotFound:
                self.redis.zrem(keys.RECHECK_DIGESTS, run_id)
        return due

    def ended(self, recheck: RecheckRun, state: RunState) -> Schedule | None:
        """After a re-check's digest: a single check that failed keeps its schedule (tried again);
        one that ran is done. Returns the thread's schedule as it now stands."""
        self.redis.zrem(keys.RECHECK_DIGESTS, recheck.run_id)
        schedule = self.get(state.run.team, recheck.channel, recheck.thread_ts)
        if schedule is None or schedule.next_at is not None:
            return schedule  # switched off, replaced, or repeating (already planned)
        if not verified(state) and state.status != RunStatus.stopped:  # a person's stop is not retried
            return self._plan(schedule, schedule.retry_seconds())
        self._forget(schedule)
        return None


def verified(state: RunState) -> bool:
    """The re-check ran to its end: not failed or stopped, and not finalized early (a model that
    kept failing, a budget reached) with a reason, when its sections may not have been checked."""
    return state.status == RunStatus.completed and not state.reason


def next_check_words(schedule: Schedule | None) -> str:
    """'next check Mon 7 Dec, 14:05 UTC' (or that none is scheduled)."""
    if schedule is None or schedule.next_at is None:
        return "no further check is scheduled"
    return f"next check {schedule.next_at:%a %-d %b, %H:%M} UTC"


def run_recheck(channel: str, thread_ts: str, token: str, team: str | None = None) -> str:
    """RQ entry point of a scheduled check (`team` absent: planned before keys had a team)."""
    job = get_current_job()
    redis: Redis = job.connection if job is not None else Redis()
    outcome = Rechecks(redis).start(team, channel, thread_ts, token)
    log.info("re-check of thread %s/%s: %s", channel, thread_ts, outcome)
    return outcome
