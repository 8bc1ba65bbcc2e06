"""Run state in Redis, and the stream that announces every change to publishers."""
from __future__ import annotations

from redis import Redis

from agent import RunEvent

from . import keys
from .models import Run, RunState
from .state import apply_event

# Finished runs stay readable (continuations, re-renders) for this long.
RUN_TTL_SECONDS = 90 * 24 * 3600


class RunNotFound(KeyError):
    pass


class RunStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def create(self, run: Run) -> RunState:
        state = RunState(run=run)
        pipe = self.redis.pipeline()
        pipe.set(keys.run(run.id), state.model_dump_json(), ex=RUN_TTL_SECONDS)
        pipe.sadd(keys.ACTIVE_RUNS, run.id)
        if run.channel and run.thread_ts:
            pipe.rpush(keys.thread_runs(run.channel, run.thread_ts), run.id)
        pipe.execute()
        return state

    def get(self, run_id: str) -> RunState:
        raw = self.redis.get(keys.run(run_id))
        if raw is None:
            raise RunNotFound(run_id)
        return RunState.model_validate_json(raw)

    def save(self, state: RunState) -> None:
        """Persist and announce; finished runs leave the active set."""
        pipe = self.redis.pipeline()
        pipe.set(keys.run(state.run.id), state.model_dump_json(), ex=RUN_TTL_SECONDS)
        if state.status.finished:
            pipe.srem(keys.ACTIVE_RUNS, state.run.id)
        pipe.xadd(keys.UPDATES_STREAM, {"run_id": state.run.id, "version": state.version},
                  maxlen=keys.UPDATES_MAXLEN, approximate=True)
        pipe.execute()

    def apply(self, state: RunState, event: RunEvent) -> RunState:
        state = apply_event(state, event)
        self.save(state)
        return state

    def set_messages(self, run_id: str, *, progress: str | None, report: str | None) -> RunState:
        state = self.get(run_id)
        state.run = state.run.model_copy(update={"progress_message": progress, "report_message": report})
        self.save(state)
        return state

    def mark_failed(self, run_id: str, reason: str) -> RunState:
        from agent import Finished

        state = self.get(run_id)
        if state.status.finished:
            return state
        return self.apply(state, Finished(status="failed", summary=state.summary, reason=reason))

    def active_ids(self) -> list[str]:
        return sorted(m.decode() if isinstance(m, bytes) else m for m in self.redis.smembers(keys.ACTIVE_RUNS))

    def thread_run_ids(self, channel: str, thread_ts: str) -> list[str]:
        return [m.decode() if isinstance(m, bytes) else m for m in self.redis.lrange(keys.thread_runs(channel, thread_ts), 0, -1)]

    def claim_event(self, event_id: str, ttl_seconds: int) -> bool:
        """True the first time an event id is seen (Slack retries deliver it again)."""
        return bool(self.redis.set(keys.dedupe(event_id), "1", nx=True, ex=ttl_seconds))
