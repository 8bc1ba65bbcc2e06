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
from collections.abc import Iterable
from datetime import datetime
from typing import Any, cast

from pydantic import SecretStr
from redis import Redis
from redis.typing import EncodableT, FieldT

from agent import (
    RunEvent,
    Section,
    Source,
)
from agent.charts import Chart
from agent.events import EarlierRef, utcnow
from agent.planning import Plan

from ..exceptions import LeaseLost, RunNotFound, ThreadMoved
from ..keyspace import keys
from ..keyspace.connection import ask_primary, durably, reconnect_to_primary, text
from ..keyspace.legacy_keys import adopt_legacy, last_in_list
from .models import STEPS_KEPT, Run, RunState, RunStatus
from .run_fields import MESSAGE_FIELDS, Write, _assemble, _charts, _file_notices, _thread_summary, _time, write_for
from .sealing import open_sealed, seal
from .state import apply_in_place
from .store_scripts import _LINK, _WRITE, WriteOutcome, WriteResult

__all__ = ["LeaseLost", "MAX_CAS_RETRIES", "RUN_TTL_SECONDS", "RunNotFound", "RunStore", "ThreadMoved"]


log = logging.getLogger(__name__)

# Finished runs stay readable (continuations, re-renders) for this long.
RUN_TTL_SECONDS = 90 * 24 * 3600
# A writer whose copy went stale re-reads and re-applies its event; more conflicts than this
# in a row means something is writing in a loop: give up loudly rather than spin.
MAX_CAS_RETRIES = 8
# Updates-stream entries read per XRANGE while a forget looks for a run's entries.
_STREAM_PAGE = 1000


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
        earlier: Iterable[EarlierRef] = (),
    ) -> RunState:
        """Store a new run and link it to its thread (and the active set).

        With `after`, the link is a compare-and-set: it succeeds only while `after` is still the
        thread's latest run; otherwise nothing stays stored and ThreadMoved names the run that
        got there first. Written again on the new primary if a failover lost it (connection.durably)."""
        sections, sources, charts = list(sections), list(sources), list(charts)  # read twice if written twice
        return durably(
            self.redis,
            keys.run_state(run.id),
            lambda: self._create(run, sections, sources, after, next_check, charts, list(earlier)),
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
        earlier: list[EarlierRef] | None = None,
    ) -> RunState:
        state = RunState(
            run=run,
            sections=list(sections),
            sources={s.marker: s for s in sources},
            next_check=next_check,
            charts=list(charts),
            earlier=earlier or [],
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
            "earlier": json.dumps([r.model_dump(mode="json") for r in state.earlier]),
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

    def forget_updates(self, run_ids: Iterable[str]) -> int:
        """Take the runs' entries out of the updates stream (they name the run: a forget leaves
        none); returns the entries deleted. One pass over the stream, capped at UPDATES_MAXLEN."""
        forgotten = {run_id.encode() for run_id in run_ids}
        if not forgotten:
            return 0
        deleted, start = 0, "-"
        while True:
            page = cast(list[Any], self.redis.xrange(keys.UPDATES_STREAM, min=start, count=_STREAM_PAGE))
            naming = [entry for entry, fields in page if fields.get(b"run_id") in forgotten]
            if naming:
                deleted += int(self.redis.xdel(keys.UPDATES_STREAM, *naming))
            if len(page) < _STREAM_PAGE:
                return deleted
            start = "(" + text(page[-1][0])

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
