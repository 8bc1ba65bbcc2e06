"""Run state in Redis: the one place that stores it, and the stream that announces every change.

Storage is incremental, so a run's write cost per event does not grow with its length:

    deepthread:run:{id}:state            hash: the Run record and the hot fields (status, version,
                                         phase, activity, usage, budget, summary, timestamps)
    deepthread:run:{id}:sections         hash: section id -> the section (with its revisions)
    deepthread:run:{id}:section-order    sorted set: section id by when it was (re)written
    deepthread:run:{id}:sources          hash: marker -> the source
    deepthread:run:{id}:source-order     list: markers in the order they were first added
    deepthread:run:{id}:steps            list: the last STEPS_KEPT progress steps, oldest first
                                         (a write sends only the step it added or changed)

Every write is one Lua script, atomic on the server: it refuses a job's write once that job's
lease is no longer the run's (the fence, jobs/control/ownership.py), refuses to touch a finished run
(lifecycle moves only forward: queued -> running -> completed | failed | stopped), applies
a compare-and-set on the version when the writer computed its change from a copy, bumps the
version, and announces the change (with the writer's epoch, when a job wrote it). `get` reads all five keys in one transaction and
assembles the RunState.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from pydantic import SecretStr
from redis import Redis
from redis.typing import EncodableT, FieldT

from agent import (
    Finished,
    Progress,
    RunEvent,
    Section,
    SectionRevised,
    SectionWritten,
    Source,
    SourceAdded,
)
from agent.charts import Chart
from agent.events import ChartDrawn, ConstraintsFound, FileUnreadable, Notice, SearchDegraded, utcnow
from agent.planning import Plan
from agent.thread_memory import ThreadSummary

from ..exceptions import LeaseLost, RunNotFound, ThreadMoved
from ..keyspace import keys
from ..keyspace.connection import ask_primary, durably, reconnect_to_primary, text
from ..keyspace.legacy_keys import adopt_legacy, last_in_list
from .models import STEPS_KEPT, BudgetLeft, Run, RunState, RunStatus, Step, Usage
from .sealing import open_sealed, seal
from .state import apply_in_place

log = logging.getLogger(__name__)

__all__ = [
    "RUN_TTL_SECONDS",
    "LeaseLost",
    "RunNotFound",
    "RunStore",
    "ThreadMoved",
    "Write",
    "WriteOutcome",
    "WriteResult",
    "write_for",
]

# Finished runs stay readable (continuations, re-renders) for this long.
RUN_TTL_SECONDS = 90 * 24 * 3600
# A writer whose copy went stale re-reads and re-applies its event; more conflicts than this
# in a row means something is writing in a loop: give up loudly rather than spin.
MAX_CAS_RETRIES = 8
# Fields of the Run record that change after creation; kept apart so attaching them never
# rewrites the record.
MESSAGE_FIELDS = ("progress_message", "report_message")

_WRITE = """
-- KEYS: state, sections, section-order, sources, source-order, active set, updates stream, run lock, steps
-- ARGV: run id, ttl, expected version or '', allowed after finish '1'/'0', new status or '',
--       stream maxlen, fence or '', then: n, n field/value pairs; n, n id/json/move-to-end triples;
--       n, n marker/json pairs; the step's json or '', '1' when it is a new step (appended) or '0' (it
--       replaces the last), steps kept
local rank = {queued=0, planned=1, running=2, completed=3, failed=3, stopped=3}
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return {0, 0, ''} end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
-- A job's write names its lease; it lands only while the lock holds exactly that lease (ownership.py).
if ARGV[7] ~= '' and redis.call('GET', KEYS[8]) ~= ARGV[7] then return {-3, version, current} end
if rank[current] == 3 and ARGV[4] ~= '1' then return {-1, version, current} end
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= version then return {-2, version, current} end
local status = current
if ARGV[5] ~= '' and rank[ARGV[5]] > rank[current] then
  status = ARGV[5]
  redis.call('HSET', KEYS[1], 'status', status)
end
local i = 8
local n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]); i = i + 2 end
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  if ARGV[i + 2] == '1' then
    redis.call('ZADD', KEYS[3], redis.call('HINCRBY', KEYS[1], 'section_seq', 1), ARGV[i])
  end
  i = i + 3
end
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  if redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1]) == 1 then redis.call('RPUSH', KEYS[5], ARGV[i]) end
  i = i + 2
end
if ARGV[i] ~= '' then
  if ARGV[i + 1] == '1' or redis.call('LLEN', KEYS[9]) == 0 then
    redis.call('RPUSH', KEYS[9], ARGV[i])
    redis.call('LTRIM', KEYS[9], -tonumber(ARGV[i + 2]), -1)
  else
    redis.call('LSET', KEYS[9], -1, ARGV[i])
  end
  redis.call('EXPIRE', KEYS[9], ARGV[2])
end
version = redis.call('HINCRBY', KEYS[1], 'version', 1)
if rank[status] == 3 then redis.call('SREM', KEYS[6], ARGV[1]) end
local epoch = string.match(ARGV[7], '^(%d+):')
if epoch then  -- who wrote it: a reader can tell an old holder's write from a new one's
  redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[6], '*', 'run_id', ARGV[1], 'version', version, 'epoch', epoch)
else
  redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[6], '*', 'run_id', ARGV[1], 'version', version)
end
for k = 1, 5 do redis.call('EXPIRE', KEYS[k], ARGV[2]) end
return {1, version, status}
"""

_LINK = """
-- KEYS: the thread's run list, the active set. ARGV: run id, the run it must follow or '', ttl.
-- Compare-and-set on the thread: a continuation is linked only if its parent is still the latest.
if ARGV[2] ~= '' then
  local last = redis.call('LINDEX', KEYS[1], -1)
  if last ~= ARGV[2] then return last end
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[1])
return ARGV[1]
"""


class WriteOutcome(str, Enum):
    written = "written"
    not_found = "not_found"
    closed = "closed"  # the run had finished: lifecycle moves only forward
    conflict = "conflict"  # the writer's copy was older than the stored run
    fenced = "fenced"  # the writer's lease is no longer the run's (jobs/control/ownership.py)


@dataclass
class Write:
    """One change to a run: hot fields, sections (moved to the end or revised in place), sources."""

    fields: dict[str, str] = field(default_factory=dict)
    status: RunStatus | None = None
    sections: list[tuple[Section, bool]] = field(default_factory=list)  # (section, moved to the end)
    sources: list[Source] = field(default_factory=list)
    # The progress step this change added (True) or updated (False); older steps are not resent.
    step: tuple[Step, bool] | None = None


@dataclass(frozen=True)
class WriteResult:
    outcome: WriteOutcome
    version: int
    status: RunStatus | None


def _time(value: datetime | None) -> str:
    return value.isoformat() if value else ""


def write_for(state: RunState, event: RunEvent, before_steps: int | None = None) -> Write:
    """What `event` changes, read off the state after it was applied: only those items.
    `before_steps` is the number of the last step before the event (None: there was none), so a
    Progress that added no step (the same activity again) sends none."""
    change = Write(fields={"updated_at": _time(state.updated_at)})
    if state.report_updated_at is not None and isinstance(
        event, (SectionWritten, SectionRevised, Finished, ChartDrawn)
    ):
        change.fields["report_updated_at"] = _time(state.report_updated_at)
    if isinstance(event, SourceAdded):
        change.sources.append(state.sources[event.source.marker])
        if state.steps:
            change.step = (state.steps[-1], False)  # the step that found it lists it
    elif isinstance(event, (SectionWritten, SectionRevised)):
        section = state.section(event.section_id)
        if section is not None:
            change.sections.append((section, isinstance(event, SectionWritten)))
    elif isinstance(event, Finished):
        change.status = state.status
        change.fields.update(
            summary=state.summary,
            reason=state.reason,
            phase=state.phase,
            activity=state.activity,
            context_summaries=json.dumps(state.context_summaries),
            finished_at=_time(state.finished_at),
            checking=state.checking,
            thread_summary=_thread_summary(state),
        )
    elif isinstance(event, ConstraintsFound):
        change.fields["run"] = state.run.model_dump_json(exclude=set(MESSAGE_FIELDS))
        change.fields["constraints_changed"] = "1" if state.constraints_changed else ""
    elif isinstance(event, FileUnreadable):
        change.fields["file_notices"] = _file_notices(state)
    elif isinstance(event, (SearchDegraded, Notice)):
        change.fields["notices"] = json.dumps(state.notices)
    elif isinstance(event, ChartDrawn):
        change.fields["charts"] = _charts(state)
    else:
        change.status = state.status
        change.fields.update(
            phase=state.phase,
            activity=state.activity,
            checking=state.checking,
            usage=state.usage.model_dump_json(),
            budget_left=state.budget_left.model_dump_json() if state.budget_left else "",
        )
        if isinstance(event, Progress) and state.steps and (before_steps is None or state.steps[-1].n != before_steps):
            change.step = (state.steps[-1], True)
    return change


class RunStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._write = redis.register_script(_WRITE)
        self._link = redis.register_script(_LINK)

    # --- creating --------------------------------------------------------------------

    def create(
        self,
        run: Run,
        *,
        sections: Iterable[Section] = (),
        sources: Iterable[Source] = (),
        after: str | None = None,
        next_check: datetime | None = None,
        charts: Iterable[Chart] = (),
    ) -> RunState:
        """Store a new run and link it to its thread (and the active set).

        With `after`, the link is a compare-and-set: it succeeds only while `after` is still the
        thread's latest run; otherwise nothing stays stored and ThreadMoved names the run that
        got there first. Written again on the new primary if a failover lost it (connection.durably)."""
        sections, sources, charts = list(sections), list(sources), list(charts)  # read twice if written twice
        return durably(
            self.redis,
            keys.run_state(run.id),
            lambda: self._create(run, sections, sources, after, next_check, charts),
            f"run {run.id}",
        )

    def _create(
        self,
        run: Run,
        sections: Iterable[Section],
        sources: Iterable[Source],
        after: str | None,
        next_check: datetime | None,
        charts: Iterable[Chart],
    ) -> RunState:
        state = RunState(
            run=run,
            sections=list(sections),
            sources={s.marker: s for s in sources},
            next_check=next_check,
            charts=list(charts),
        )
        self._store_new(state)
        linked = (
            text(
                self._link(
                    keys=[keys.thread_runs(run.team, run.channel or "", run.thread_ts or ""), keys.ACTIVE_RUNS],
                    args=[run.id, after or "", RUN_TTL_SECONDS],
                )
            )
            if run.channel and run.thread_ts
            else self._activate(run.id)
        )
        if linked != run.id:
            self.redis.delete(*self._keys(run.id)[:5], keys.run_steps(run.id))
            raise ThreadMoved(linked)
        return state

    def _activate(self, run_id: str) -> str:
        self.redis.sadd(keys.ACTIVE_RUNS, run_id)
        return run_id

    def _store_new(self, state: RunState) -> None:
        run_id = state.run.id
        state_key, sections_key, order_key, sources_key, source_order_key = self._keys(run_id)[:5]
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(state_key, mapping=self._hot(state))
        if state.sections:
            pipe.hset(sections_key, mapping={s.section_id: s.model_dump_json() for s in state.sections})
            pipe.zadd(order_key, {s.section_id: n for n, s in enumerate(state.sections, 1)})
            pipe.hset(state_key, "section_seq", len(state.sections))
        if state.sources:
            pipe.hset(sources_key, mapping={m: s.model_dump_json() for m, s in state.sources.items()})
            pipe.rpush(source_order_key, *state.sources)
        if state.steps:
            pipe.delete(keys.run_steps(run_id))
            pipe.rpush(keys.run_steps(run_id), *(step.model_dump_json() for step in state.steps))
            pipe.expire(keys.run_steps(run_id), RUN_TTL_SECONDS)
        for key in self._keys(run_id)[:5]:
            pipe.expire(key, RUN_TTL_SECONDS)
        # A secret: its own key, a short life, never the record, and only encrypted (jobs/records/sealing.py).
        sealed = seal(state.run.action_token.get_secret_value()) if state.run.action_token is not None else None
        if sealed is not None:
            pipe.set(keys.action_token(run_id), sealed, ex=keys.ACTION_TOKEN_TTL_SECONDS)
        pipe.execute()

    @staticmethod
    def _hot(state: RunState) -> dict[FieldT, EncodableT]:
        run = state.run
        return {
            "run": run.model_dump_json(exclude=set(MESSAGE_FIELDS)),
            "progress_message": run.progress_message or "",
            "report_message": run.report_message or "",
            "status": state.status.value,
            "version": str(state.version),
            "phase": state.phase,
            "activity": state.activity,
            "checking": state.checking,
            "summary": state.summary,
            "reason": state.reason,
            "context_summaries": json.dumps(state.context_summaries),
            "usage": state.usage.model_dump_json(),
            "budget_left": state.budget_left.model_dump_json() if state.budget_left else "",
            "started_at": _time(state.started_at),
            "updated_at": _time(state.updated_at),
            "report_updated_at": _time(state.report_updated_at),
            "finished_at": _time(state.finished_at),
            "notices": json.dumps(state.notices),
            "file_notices": _file_notices(state),
            "constraints_changed": "1" if state.constraints_changed else "",
            "charts": _charts(state),
            "thread_summary": _thread_summary(state),
            "next_check": _time(state.next_check),
            "plan": state.plan.model_dump_json() if state.plan is not None else "",
            "plan_expires_at": _time(state.plan_expires_at),
            "approved_by": state.approved_by or "",
        }

    @staticmethod
    def _keys(run_id: str) -> list[str]:
        return [
            keys.run_state(run_id),
            keys.run_sections(run_id),
            keys.run_section_order(run_id),
            keys.run_sources(run_id),
            keys.run_source_order(run_id),
            keys.ACTIVE_RUNS,
            keys.UPDATES_STREAM,
            keys.lock(run_id),
            keys.run_steps(run_id),
        ]

    # --- reading ---------------------------------------------------------------------

    def get(self, run_id: str) -> RunState:
        state_key, sections_key, order_key, sources_key, source_order_key = self._keys(run_id)[:5]
        pipe = self.redis.pipeline(transaction=True)  # one consistent snapshot of all five keys
        pipe.hgetall(state_key)
        pipe.hgetall(sections_key)
        pipe.zrange(order_key, 0, -1)
        pipe.hgetall(sources_key)
        pipe.lrange(source_order_key, 0, -1)
        pipe.lrange(keys.run_steps(run_id), 0, -1)
        pipe.get(keys.action_token(run_id))
        hot, sections, order, sources, source_order, steps, token = pipe.execute()
        if not hot:
            return self._legacy(run_id)
        state = _assemble(run_id, hot, sections, order, sources, source_order, steps)
        opened = open_sealed(text(token)) if token else None
        if opened:
            state.run = state.run.model_copy(update={"action_token": SecretStr(opened)})
        return state

    def _legacy(self, run_id: str) -> RunState:
        """A run stored whole by an earlier version: move it to the incremental layout once."""
        raw = self.redis.get(keys.run(run_id))
        if raw is None:
            raise RunNotFound(run_id)
        state = RunState.model_validate_json(raw)
        self._store_new(state)
        self.redis.delete(keys.run(run_id))
        return state

    def active_ids(self) -> list[str]:
        return sorted(text(m) for m in self.redis.smembers(keys.ACTIVE_RUNS))

    def thread_run_ids(self, team: str | None, channel: str, thread_ts: str) -> list[str]:
        """The runs of a thread of this workspace, oldest first (none for another workspace's thread)."""
        key = keys.thread_runs(team, channel, thread_ts)
        adopt_legacy(
            self.redis,
            key,
            keys.legacy_thread_runs(channel, thread_ts),
            team=team,
            team_of=self.team_of,
            run_id_of=last_in_list,
        )
        return [text(m) for m in self.redis.lrange(key, 0, -1)]

    def team_of(self, run_id: str) -> str | None:
        """The workspace a run belongs to (None: no such run, or a run without one)."""
        try:
            return self.get(run_id).run.team
        except RunNotFound:
            return None

    def claim_event(self, team: str | None, event_id: str, ttl_seconds: int) -> bool:
        """True the first time this workspace's event id is seen (Slack retries deliver it again)."""
        if self.redis.exists(keys.dedupe(event_id)):
            return False  # claimed by a version whose marks had no team, within the last day
        return bool(self.redis.set(keys.seen(team, event_id), "1", nx=True, ex=ttl_seconds))

    # --- writing ---------------------------------------------------------------------

    def write(
        self,
        run_id: str,
        change: Write,
        *,
        expected_version: int | None = None,
        after_finish: bool = False,
        fence: str | None = None,
    ) -> WriteResult:
        """Apply `change` atomically (see the module docstring for the rules). With `fence` (a job's
        lease, jobs/control/ownership.py), only while that lease still holds the run."""
        args: list[Any] = [
            run_id,
            RUN_TTL_SECONDS,
            "" if expected_version is None else expected_version,
            "1" if after_finish else "0",
            change.status.value if change.status else "",
            keys.UPDATES_MAXLEN,
            fence or "",
            len(change.fields),
        ]
        for name, value in change.fields.items():
            args += [name, value]
        args.append(len(change.sections))
        for section, to_end in change.sections:
            args += [section.section_id, section.model_dump_json(), "1" if to_end else "0"]
        args.append(len(change.sources))
        for source in change.sources:
            args += [source.marker, source.model_dump_json()]
        if change.step is not None:
            step, new = change.step
            args += [step.model_dump_json(), "1" if new else "0", STEPS_KEPT]
        else:
            args += ["", "0", STEPS_KEPT]
        code, version, status = self._write(keys=self._keys(run_id), args=args)
        if (
            int(code) == 1
            and change.status is not None
            and change.status.finished
            and not self._ended_on_primary(run_id)
        ):
            # The run's end went to a primary being demoted (a failover's moment, ~10 s in bench.soak):
            # lost when it resyncs, the run would look alive again, be run again from its checkpoint,
            # and a follow-up asked meanwhile be taken as its note. Written again on the new primary;
            # a caller that compares versions reads the run there and applies its event again.
            log.warning(
                "run %s: its end was written to a Redis primary a failover had just replaced; "
                "writing it again on the new primary",
                run_id,
            )
            reconnect_to_primary(self.redis)
            if expected_version is not None:
                return WriteResult(WriteOutcome.conflict, int(version), None)
            code, version, status = self._write(keys=self._keys(run_id), args=args)
        outcome = {
            1: WriteOutcome.written,
            0: WriteOutcome.not_found,
            -1: WriteOutcome.closed,
            -2: WriteOutcome.conflict,
            -3: WriteOutcome.fenced,
        }[int(code)]
        return WriteResult(outcome, int(version), RunStatus(text(status)) if status else None)

    def _ended_on_primary(self, run_id: str) -> bool:
        """Whether the primary the sentinels name now has the run ended (one Redis: always)."""
        status = ask_primary(self.redis, "HGET", keys.run_state(run_id), "status")
        return status is None or RunStatus(text(status)).finished

    def apply(self, state: RunState, event: RunEvent, *, fence: str | None = None) -> RunState:
        """Apply one event from the writer's copy `state` (updated in place and returned).

        Compare-and-set on the copy's version: if someone else wrote since, the copy is reloaded
        and the event applied again to the newer state. A finished run is not changed: the
        stored (finished) state comes back, so a late writer learns the run is over. A job's
        event carries its `fence`; once another job holds the run, LeaseLost is raised."""
        for _ in range(MAX_CAS_RETRIES):
            expected = state.version
            last_step = state.steps[-1].n if state.steps else None
            state = apply_in_place(state, event)
            result = self.write(
                state.run.id, write_for(state, event, last_step), expected_version=expected, fence=fence
            )
            if result.outcome == WriteOutcome.written:
                state.version = result.version
                return state
            if result.outcome == WriteOutcome.not_found:
                raise RunNotFound(state.run.id)
            if result.outcome == WriteOutcome.fenced:
                raise LeaseLost(state.run.id)
            state = self.get(state.run.id)
            if result.outcome == WriteOutcome.closed:
                return state
        raise RuntimeError(f"run {state.run.id}: {MAX_CAS_RETRIES} conflicting writes in a row")

    def set_messages(self, run_id: str, *, progress: str | None, report: str | None) -> RunState:
        """Where the surface shows the run; references only, so allowed at any point of its life."""
        result = self.write(
            run_id,
            Write(
                fields={
                    "progress_message": progress or "",
                    "report_message": report or "",
                    "updated_at": _time(utcnow()),
                }
            ),
            after_finish=True,
        )
        if result.outcome == WriteOutcome.not_found:
            raise RunNotFound(run_id)
        return self.get(run_id)

    def finish(self, run_id: str, status: RunStatus, reason: str, *, fence: str | None = None) -> RunState:
        """End a run from outside its worker (a forced stop, a failure), or from its job (`fence`:
        refused with LeaseLost once another job holds the run). A run that already finished keeps
        its ending; either way the stored state comes back."""
        now = _time(utcnow())
        result = self.write(
            run_id,
            Write(
                status=status,
                fields={
                    "reason": reason,
                    "phase": status.value,
                    "activity": "",
                    "finished_at": now,
                    "updated_at": now,
                    "report_updated_at": now,
                },
            ),
            fence=fence,
        )
        if result.outcome == WriteOutcome.not_found:
            raise RunNotFound(run_id)
        if result.outcome == WriteOutcome.fenced:
            raise LeaseLost(run_id)
        return self.get(run_id)

    def set_next_check(self, run_id: str, when: datetime | None) -> RunState:
        """When the thread's report is re-checked next (None: not scheduled). Presentation only,
        so allowed at any point of the run's life; the change is announced, so the footer follows."""
        result = self.write(run_id, Write(fields={"next_check": _time(when)}), after_finish=True)
        if result.outcome == WriteOutcome.not_found:
            raise RunNotFound(run_id)
        return self.get(run_id)

    def propose_plan(self, run_id: str, plan: Plan, expires_at: datetime) -> RunState:
        """Plan first: the (new) plan awaits approval; the run moves to planned (never back). A draft that
        arrives after approval (or after the run moved on) changes nothing (compare-and-set)."""
        for _ in range(MAX_CAS_RETRIES):
            state = self.get(run_id)
            if state.status not in (RunStatus.queued, RunStatus.planned) or state.approved_by:
                return state
            result = self._propose(run_id, plan, expires_at, state.version)
            if result.outcome != WriteOutcome.conflict:
                break
        if result.outcome == WriteOutcome.not_found:
            raise RunNotFound(run_id)
        return self.get(run_id)

    def _propose(self, run_id: str, plan: Plan, expires_at: datetime, version: int) -> WriteResult:
        return self.write(
            run_id,
            Write(
                status=RunStatus.planned,
                fields={
                    "plan": plan.model_dump_json(),
                    "plan_expires_at": _time(expires_at),
                    "phase": RunStatus.planned.value,
                    "activity": "",
                    "usage": plan.usage.model_dump_json(),
                    "updated_at": _time(utcnow()),
                },
            ),
            expected_version=version,
        )

    def approve(self, run_id: str, by: str) -> RunState | None:
        """Record who approved the plan: only while it awaits approval (compare-and-set); None otherwise."""
        for _ in range(MAX_CAS_RETRIES):
            state = self.get(run_id)
            if state.status != RunStatus.planned or state.approved_by:
                return None
            change = Write(fields={"approved_by": by, "updated_at": _time(utcnow())})
            result = self.write(run_id, change, expected_version=state.version)
            if result.outcome == WriteOutcome.written:
                return self.get(run_id)
            if result.outcome != WriteOutcome.conflict:
                return None
        return None

    def mark_failed(self, run_id: str, reason: str, *, fence: str | None = None) -> RunState:
        return self.finish(run_id, RunStatus.failed, reason, fence=fence)


def _assemble(
    run_id: str,
    hot: Mapping[bytes, bytes],
    sections: Mapping[bytes, bytes],
    order: list[bytes],
    sources: Mapping[bytes, bytes],
    source_order: list[bytes],
    steps: list[bytes] | None = None,
) -> RunState:
    h = {text(k): text(v) for k, v in hot.items()}
    run = Run.model_validate_json(h["run"]).model_copy(update={name: h.get(name) or None for name in MESSAGE_FIELDS})
    return RunState.model_validate(
        {
            "run": run,
            "status": h["status"],
            "version": int(h.get("version", 0)),
            "phase": h.get("phase", ""),
            "activity": h.get("activity", ""),
            "checking": h.get("checking", ""),
            "sections": [Section.model_validate_json(sections[sid]) for sid in order if sid in sections],
            "sources": {text(m): Source.model_validate_json(sources[m]) for m in source_order if m in sources},
            "summary": h.get("summary", ""),
            "reason": h.get("reason", ""),
            "context_summaries": json.loads(h.get("context_summaries") or "[]"),
            "usage": Usage.model_validate_json(h["usage"]) if h.get("usage") else Usage(),
            "budget_left": BudgetLeft.model_validate_json(h["budget_left"]) if h.get("budget_left") else None,
            # Timestamps are stored as ISO text; pydantic parses them back.
            "started_at": h.get("started_at") or None,
            "updated_at": h.get("updated_at") or utcnow(),
            "report_updated_at": h.get("report_updated_at") or None,
            "finished_at": h.get("finished_at") or None,
            "notices": json.loads(h.get("notices") or "[]"),
            "file_notices": json.loads(h.get("file_notices") or "[]"),
            "constraints_changed": bool(h.get("constraints_changed")),
            "charts": [Chart.model_validate(c) for c in json.loads(h.get("charts") or "[]")],
            # Runs written before steps had a list of their own kept them in the hash.
            "steps": [json.loads(step) for step in steps] if steps else json.loads(h.get("steps") or "[]"),
            "next_check": h.get("next_check") or None,
            "plan": Plan.model_validate_json(h["plan"]) if h.get("plan") else None,
            "plan_expires_at": h.get("plan_expires_at") or None,
            "approved_by": h.get("approved_by") or None,
            "thread_summary": ThreadSummary.model_validate_json(h["thread_summary"])
            if h.get("thread_summary")
            else None,
        }
    )


def _file_notices(state: RunState) -> str:
    return json.dumps([notice.model_dump() for notice in state.file_notices])


def _charts(state: RunState) -> str:
    return json.dumps([c.model_dump(mode="json") for c in state.charts])


def _thread_summary(state: RunState) -> str:
    return state.thread_summary.model_dump_json() if state.thread_summary is not None else ""
