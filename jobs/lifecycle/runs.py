"""What the surface (the bot) may do to runs: the one API it uses, so `jobs/` alone owns
run records and their Redis keys.

`Runs` is synchronous (workers, the CLI, tests); `AsyncRuns` is the same API for an event
loop: every call runs in a worker thread, so a Redis round trip never stalls the loop that
acks Slack events.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from enum import Enum
from typing import cast

from pydantic import SecretStr
from redis import Redis
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError

from ..budgets.spend import record_spend
from ..control.control import add_note, record_upgrade
from ..control.hard_stop import HARD_STOP_SECONDS, claim_due, request_stop_with_deadline
from ..control.hard_stop import done as hard_stop_done
from ..exceptions import RunNotFound, ThreadMoved
from ..keyspace import keys
from ..keyspace.connection import on_primary, text
from ..keyspace.legacy_keys import adopt_legacy, string_value
from ..records.continuation import create_successor, latest_run, successor
from ..records.models import Run, RunState, RunStatus
from ..records.store import RUN_TTL_SECONDS, RunStore
from .queue import enqueue

__all__ = ["AsyncRuns", "Continuation", "Runs", "Upgrade"]

log = logging.getLogger(__name__)

# A reply is claimed for a continuation once; Slack retries an event for up to ~5 minutes.
CONTINUE_DEDUPE_TTL_SECONDS = 24 * 3600
# A continuation that loses the race to a run that has itself already ended tries again
# from that run, at most this often (each try needs another run to end in between).
MAX_CONTINUE_TRIES = 3
# Orphaned runs returned per check: a backlog is posted over a few checks.
MAX_UNPOSTED_PER_CHECK = 20


# One process posts a run's messages (the mention's handler, or the orphan sweep for a run whose
# handler died), renewing this lease while its posts wait for their rate-limit slots; if it dies,
# another may post the run this long after its last renewal.
POSTING_LEASE_SECONDS = 30.0

_RENEW_POSTING = """
-- KEYS: the posting lease. ARGV: owner, ms. Compare-and-expire: only the owner extends it.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
"""
_RELEASE_POSTING = """
-- KEYS: the posting lease. ARGV: owner. Compare-and-delete.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"""


class Upgrade(str, Enum):
    raised = "raised"  # the running loop adopts the deep budget at its next step
    already = "already"  # this event was seen before (a retry): nothing changed
    next_run = "next_run"  # the run had ended: the thread's next continuation runs deep


@dataclass(frozen=True)
class Continuation:
    """A reply after the end: `started` is True when `state` is a new run to post and launch;
    False when another reply got there first and this request became a note of its run."""

    state: RunState
    started: bool


class Runs:
    def __init__(self, store: RunStore, *, hard_stop_seconds: float = HARD_STOP_SECONDS) -> None:
        self.store = store
        self._redis: Redis = store.redis
        self.hard_stop_seconds = hard_stop_seconds

    # --- reading -------------------------------------------------------------------

    def get(self, run_id: str) -> RunState:
        return self.store.get(run_id)

    def claim_event(self, team: str | None, event_id: str, ttl_seconds: int) -> bool:
        return self.store.claim_event(team, event_id, ttl_seconds)

    def in_thread(self, team: str | None, channel: str, thread_ts: str) -> bool:
        """True when the thread has runs of this workspace."""
        return bool(self.store.thread_run_ids(team, channel, thread_ts))

    def latest_in_thread(self, team: str | None, channel: str, thread_ts: str) -> RunState | None:
        return latest_run(self.store, team, channel, thread_ts)

    def run_of_message(self, team: str | None, channel: str, ts: str) -> RunState | None:
        """The run a progress or report message of this workspace belongs to (for reactions and buttons)."""
        key = keys.message_run(team, channel, ts)
        adopt_legacy(
            self._redis,
            key,
            keys.legacy_message_run(channel, ts),
            team=team,
            team_of=self.store.team_of,
            run_id_of=string_value,
        )
        run_id = self._redis.get(key)
        if not run_id:
            return None
        try:
            state = self.store.get(text(run_id))
        except RunNotFound:
            return None
        # Never another workspace's run, whatever the link says.
        return state if keys.team_part(state.run.team) == keys.team_part(team) else None

    def active_in(self, team: str | None, *, enterprise: str | None = None) -> list[RunState]:
        """Active runs of a workspace, or with `enterprise` of every workspace of that org."""
        found = []
        for run_id in self.store.active_ids():
            try:
                state = self.store.get(run_id)
            except RunNotFound:
                continue
            run = state.run
            if (run.enterprise == enterprise) if enterprise else (keys.team_part(run.team) == keys.team_part(team)):
                found.append(state)
        return found

    def stop_workspace(self, team: str | None, reason: str, *, enterprise: str | None = None) -> list[str]:
        """The app was uninstalled (or its bot token revoked): end every active run of the workspace
        (or, with `enterprise`, of the org) as stopped, with `reason`, kill their jobs and delete their
        action tokens. Returns their ids."""
        stopped = []
        for state in self.active_in(team, enterprise=enterprise):
            self.force_stop(state.run.id, reason)
            self._redis.zrem(keys.UNPOSTED, state.run.id)  # nothing can be posted for it any more
            # The requester's search permission came with the workspace's install: it goes with its tokens.
            self._redis.delete(keys.action_token(state.run.id))
            stopped.append(state.run.id)
        return stopped

    # --- starting ------------------------------------------------------------------

    def start(self, run: Run) -> RunState:
        """Record a new run (queued, linked to its thread); `attach_messages` and `launch` follow."""
        self._mark_unposted(run)
        return self.store.create(run)

    def _mark_unposted(self, run: Run) -> None:
        """Until `attach_messages`, the run is listed as not shown in Slack, so a serve process
        posts it if the one that started it died first (`unposted`). Listed before the run is
        stored: a crash in between leaves an id `unposted` drops, never an unlisted run."""
        if run.channel:
            self._redis.zadd(keys.UNPOSTED, {run.id: run.created_at.timestamp()})

    def attach_messages(self, run_id: str, *, progress: str, report: str) -> RunState:
        """Where the run is shown; reactions and buttons on either message find the run."""

        def attach() -> RunState:
            state = self.store.set_messages(run_id, progress=progress, report=report)
            pipe = self._redis.pipeline()
            for ts in (progress, report):
                pipe.set(keys.message_run(state.run.team, state.run.channel or "", ts), run_id, ex=RUN_TTL_SECONDS)
            pipe.zrem(keys.UNPOSTED, run_id)
            pipe.delete(keys.posting(run_id))
            pipe.execute()
            return state

        state = attach()
        # The run's messages are how a stop or a reply finds it: attached again if a failover lost them.
        if on_primary(self._redis, keys.message_run(state.run.team, state.run.channel or "", progress)):
            return state
        log.warning(
            "run %s: its messages were attached on a Redis primary a failover had just replaced; "
            "attaching them again on the new primary",
            run_id,
        )
        self._redis.connection_pool.disconnect(inuse_connections=False)
        return attach()

    def unposted(self, older_than_seconds: float) -> list[RunState]:
        """Runs (any status) whose messages were never posted, created at least this long ago:
        the process that started them died between starting and posting."""
        seconds, micros = self._redis.time()
        ids = cast(
            list[bytes],
            self._redis.zrangebyscore(
                keys.UNPOSTED, "-inf", seconds + micros / 1e6 - older_than_seconds, start=0, num=MAX_UNPOSTED_PER_CHECK
            ),
        )
        found = []
        for raw in ids:
            run_id = text(raw)
            try:
                found.append(self.store.get(run_id))
            except RunNotFound:  # listed, then never stored (see _mark_unposted), or expired
                self._redis.zrem(keys.UNPOSTED, run_id)
        return found

    def claim_posting(self, run_id: str, lease_seconds: float = POSTING_LEASE_SECONDS, owner: str = "1") -> bool:
        """One process posts a run's messages: True when `owner` now holds the posting lease. It
        renews it while it posts (`renew_posting`); if it dies, the lease runs out and another tries."""
        return bool(self._redis.set(keys.posting(run_id), owner, nx=True, px=int(lease_seconds * 1000)))

    def renew_posting(self, run_id: str, owner: str, lease_seconds: float = POSTING_LEASE_SECONDS) -> bool:
        """Extend `owner`'s posting lease; False once it is not theirs (lapsed, or another's)."""
        script = self._redis.register_script(_RENEW_POSTING)
        return bool(script(keys=[keys.posting(run_id)], args=[owner, int(lease_seconds * 1000)]))

    def release_posting(self, run_id: str, owner: str) -> None:
        """Let go of the posting lease if it is still `owner`'s."""
        self._redis.register_script(_RELEASE_POSTING)(keys=[keys.posting(run_id)], args=[owner])

    def launch(self, run: Run) -> None:
        """Queue the run's job."""
        enqueue(self._redis, run)

    def continue_from(
        self,
        parent: RunState,
        request: str,
        *,
        requester: str,
        author: str,
        event_id: str,
        action_token: SecretStr | None = None,
        shared_audience: bool = False,
        question_ts: str | None = None,
    ) -> Continuation | None:
        """A reply after `parent` ended. Exactly one of several replies racing each other starts
        the continuation (a compare-and-set on the thread); the others become its notes.
        None for a repeated delivery of the same reply."""
        if not self.store.claim_event(parent.run.team, f"continue:{event_id}", CONTINUE_DEDUPE_TTL_SECONDS):
            return None
        for _ in range(MAX_CONTINUE_TRIES):
            run = successor(
                self.store,
                parent,
                request,
                requester,
                action_token,
                shared_audience=shared_audience,
                question_ts=question_ts,
            )
            self._mark_unposted(run)
            try:
                return Continuation(create_successor(self.store, parent, run), started=True)
            except ThreadMoved as moved:
                self._redis.zrem(keys.UNPOSTED, run.id)
                if moved.latest is None:
                    raise RunNotFound(parent.run.id) from None
                winner = self.store.get(moved.latest)
            if not winner.status.finished:
                add_note(self._redis, winner.run.id, event_id, author, request)
                return Continuation(winner, started=False)
            parent = winner  # the run that got there first has ended too: continue from it
        raise RuntimeError(f"thread of run {parent.run.id}: {MAX_CONTINUE_TRIES} continuations raced and all ended")

    # --- steering ------------------------------------------------------------------

    def request_stop(self, run_id: str, by: str) -> bool:
        """Ask the loop to stop and finalize; True for the first request (later ones change nothing).
        Its fallback is recorded with it: if the run has not ended `hard_stop_seconds` from now,
        `force_due_stops` (serve or any worker, whichever is alive) forces the stop."""
        return request_stop_with_deadline(self._redis, run_id, by, self.hard_stop_seconds)

    def force_due_stops(self) -> list[str]:
        """Force every stop whose grace has run out and that this caller claimed; returns the ids
        of runs it ended. A run that wound down in time keeps its own ending."""
        forced = []
        for due in claim_due(self._redis):
            try:
                if not self.store.get(due.run_id).status.finished:
                    self.force_stop(due.run_id, due.reason)
                    forced.append(due.run_id)
                    log.warning("run %s: not wound down in time after its stop; forced", due.run_id)
            except RunNotFound:
                pass  # expired meanwhile: nothing left to stop
            hard_stop_done(self._redis, due.run_id)  # not reached if this process dies first: retried
        return forced

    def force_stop(self, run_id: str, reason: str) -> RunState:
        """End the run as stopped now and kill its job. The stop is recorded first, so whatever
        the job still writes is refused; a run that already ended keeps its ending."""
        state = self.store.finish(run_id, RunStatus.stopped, reason)
        record_spend(self._redis, state)  # the killed job records nothing itself
        job_id = self._redis.get(keys.current_job(run_id))
        if job_id:
            try:
                send_stop_job_command(self._redis, text(job_id))
            except (InvalidJobOperation, NoSuchJobError):  # the job just finished, or never started
                log.warning("run %s: hard stop of job %s failed", run_id, job_id)
        return self.store.get(run_id)  # with its cost shown (record_spend writes it)

    def upgrade(self, run_id: str, event_id: str) -> Upgrade:
        """The deep budget, once per event id: for the running loop, or for the thread's next run."""
        state = self.store.get(run_id)
        run = state.run
        if state.status.finished:
            self._redis.set(
                keys.thread_profile(run.team, run.channel or "", run.thread_ts or ""), "deep", ex=RUN_TTL_SECONDS
            )
            return Upgrade.next_run
        return Upgrade.raised if record_upgrade(self._redis, run.id, event_id) else Upgrade.already

    def add_note(self, run_id: str, event_id: str, author: str, text: str) -> bool:
        """A note for the running loop's next step, once per event id. True when new."""
        return add_note(self._redis, run_id, event_id, author, text)

    # --- plan first ----------------------------------------------------------------

    def approve_plan(self, run_id: str, by: str) -> RunState | None:
        """Approve a plan awaiting approval and queue the research (None: it was not awaiting approval)."""
        from .planning import approve

        return approve(self._redis, run_id, by)

    def change_plan(self, run_id: str, event_id: str, author: str, text: str) -> bool:
        """A change asked for before approval: a new plan is drafted with it. False for a retry of the
        same event, or when the plan is no longer awaiting approval."""
        state = self.store.get(run_id)
        if state.status != RunStatus.planned or state.approved_by:
            return False
        if not add_note(self._redis, run_id, event_id, author, text):
            return False
        enqueue(self._redis, state.run, stage=f"plan{int(self._redis.incr(keys.plan_drafts(run_id)))}")
        return True

    def expire_plans(self) -> list[str]:
        from .planning import expire_due

        return expire_due(self._redis)

    def fail(self, run_id: str, reason: str) -> RunState:
        """End the run as failed; it is no longer waiting to be posted (the surface gave up on it)."""
        state = self.store.mark_failed(run_id, reason)
        self._redis.zrem(keys.UNPOSTED, run_id)
        record_spend(self._redis, state)
        return state


class AsyncRuns:
    """`Runs` for an event loop (see the module docstring)."""

    def __init__(self, runs: Runs) -> None:
        self.sync = runs

    async def get(self, run_id: str) -> RunState:
        return await asyncio.to_thread(self.sync.get, run_id)

    async def claim_event(self, team: str | None, event_id: str, ttl_seconds: int) -> bool:
        return await asyncio.to_thread(self.sync.claim_event, team, event_id, ttl_seconds)

    async def in_thread(self, team: str | None, channel: str, thread_ts: str) -> bool:
        return await asyncio.to_thread(self.sync.in_thread, team, channel, thread_ts)

    async def latest_in_thread(self, team: str | None, channel: str, thread_ts: str) -> RunState | None:
        return await asyncio.to_thread(self.sync.latest_in_thread, team, channel, thread_ts)

    async def run_of_message(self, team: str | None, channel: str, ts: str) -> RunState | None:
        return await asyncio.to_thread(self.sync.run_of_message, team, channel, ts)

    async def stop_workspace(self, team: str | None, reason: str, *, enterprise: str | None = None) -> list[str]:
        return await asyncio.to_thread(lambda: self.sync.stop_workspace(team, reason, enterprise=enterprise))

    async def start(self, run: Run) -> RunState:
        return await asyncio.to_thread(self.sync.start, run)

    async def attach_messages(self, run_id: str, *, progress: str, report: str) -> RunState:
        return await asyncio.to_thread(lambda: self.sync.attach_messages(run_id, progress=progress, report=report))

    async def launch(self, run: Run) -> None:
        await asyncio.to_thread(self.sync.launch, run)

    async def continue_from(
        self,
        parent: RunState,
        request: str,
        *,
        requester: str,
        author: str,
        event_id: str,
        action_token: SecretStr | None = None,
        shared_audience: bool = False,
        question_ts: str | None = None,
    ) -> Continuation | None:
        return await asyncio.to_thread(
            lambda: self.sync.continue_from(
                parent,
                request,
                requester=requester,
                author=author,
                event_id=event_id,
                action_token=action_token,
                shared_audience=shared_audience,
                question_ts=question_ts,
            )
        )

    async def request_stop(self, run_id: str, by: str) -> bool:
        return await asyncio.to_thread(self.sync.request_stop, run_id, by)

    async def force_stop(self, run_id: str, reason: str) -> RunState:
        return await asyncio.to_thread(self.sync.force_stop, run_id, reason)

    async def force_due_stops(self) -> list[str]:
        return await asyncio.to_thread(self.sync.force_due_stops)

    async def upgrade(self, run_id: str, event_id: str) -> Upgrade:
        return await asyncio.to_thread(self.sync.upgrade, run_id, event_id)

    async def add_note(self, run_id: str, event_id: str, author: str, text: str) -> bool:
        return await asyncio.to_thread(self.sync.add_note, run_id, event_id, author, text)

    async def approve_plan(self, run_id: str, by: str) -> RunState | None:
        return await asyncio.to_thread(self.sync.approve_plan, run_id, by)

    async def change_plan(self, run_id: str, event_id: str, author: str, text: str) -> bool:
        return await asyncio.to_thread(self.sync.change_plan, run_id, event_id, author, text)

    async def expire_plans(self) -> list[str]:
        return await asyncio.to_thread(self.sync.expire_plans)

    async def fail(self, run_id: str, reason: str) -> RunState:
        return await asyncio.to_thread(self.sync.fail, run_id, reason)

    async def unposted(self, older_than_seconds: float) -> list[RunState]:
        return await asyncio.to_thread(self.sync.unposted, older_than_seconds)

    async def claim_posting(self, run_id: str, lease_seconds: float = POSTING_LEASE_SECONDS, owner: str = "1") -> bool:
        return await asyncio.to_thread(self.sync.claim_posting, run_id, lease_seconds, owner)

    async def renew_posting(self, run_id: str, owner: str, lease_seconds: float = POSTING_LEASE_SECONDS) -> bool:
        return await asyncio.to_thread(self.sync.renew_posting, run_id, owner, lease_seconds)

    async def release_posting(self, run_id: str, owner: str) -> None:
        await asyncio.to_thread(self.sync.release_posting, run_id, owner)
