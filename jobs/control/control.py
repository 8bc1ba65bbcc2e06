"""Run control through Redis: the bot records stops, upgrades and notes; the running loop
reads them at its next step. A stop or an upgrade is also announced on the control channel, so a
loop waiting on the model hears of it at once (jobs/control/control_listener.py) instead of polling."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from agent import defaults
from agent.config import Caps, budget_for
from agent.control import ControlUpdate, Note, StopRequest

from ..keyspace import keys
from ..keyspace.connection import text
from .control_listener import ControlListener, stop_watching

log = logging.getLogger(__name__)

# With notifications, the check a waiting run still makes on its own: a backstop, not the way in
# (a lost subscription wakes every run to check, and checks stay frequent until it is back).
BACKSTOP_CHECK_SECONDS = 300.0


def announce(redis: Redis, run_id: str) -> None:
    """Tell the runs' listeners that `run_id` has news (a stop, an upgrade). Best effort: a run
    whose listener missed it finds the news at its next check."""
    try:
        redis.publish(keys.CONTROL_CHANNEL, run_id)
    except Exception as exc:
        log.warning("run %s: could not announce its control change (%s); it is seen at the next check", run_id, exc)


def request_stop(redis: Redis, run_id: str, by: str) -> bool:
    """True when this is the first stop for the run (later ones change nothing)."""
    created = redis.set(keys.stop(run_id), StopRequest(by=by).model_dump_json(), nx=True, ex=keys.CONTROL_TTL_SECONDS)
    if created:
        announce(redis, run_id)
    return bool(created)


def record_upgrade(redis: Redis, run_id: str, event_id: str, profile: str = "deep") -> bool:
    """One upgrade per Slack event id: a retried event upgrades once. True when new."""
    added = redis.hsetnx(keys.upgrades(run_id), event_id, profile)
    redis.expire(keys.upgrades(run_id), keys.CONTROL_TTL_SECONDS)
    if added:
        announce(redis, run_id)
    return bool(added)


def add_note(redis: Redis, run_id: str, event_id: str, author: str, text: str) -> bool:
    """Queue a steering note for the running loop, once per event id. True when new."""
    if not redis.set(keys.dedupe(f"note:{run_id}:{event_id}"), "1", nx=True, ex=keys.CONTROL_TTL_SECONDS):
        return False
    redis.rpush(keys.notes(run_id), Note(author=author, text=text).model_dump_json())
    redis.expire(keys.notes(run_id), keys.CONTROL_TTL_SECONDS)
    return True


def upgraded_profile(redis: Redis, run_id: str) -> str | None:
    values = redis.hvals(keys.upgrades(run_id))
    return text(values[-1]) if values else None


class RedisRunControl:
    """What the loop reads. Its cursor (notes and upgrades seen) is saved in checkpoints. With a
    `listener`, a waiting loop is woken by announcements; without one it checks every half second."""

    def __init__(self, redis: AsyncRedis, run_id: str, caps: Caps, listener: ControlListener | None = None) -> None:
        self._redis = redis
        self._run_id = run_id
        self._caps = caps
        self._listener = listener
        self._signal = listener.watch(run_id) if listener is not None else asyncio.Event()
        self.notes_seen = 0
        self.upgrades_seen = 0

    def stop_signal(self) -> asyncio.Event:
        return self._signal

    def stop_check_seconds(self) -> float:
        if self._listener is not None and self._listener.subscribed:
            return BACKSTOP_CHECK_SECONDS
        return defaults.STOP_POLL_SECONDS

    async def close(self) -> None:
        """Stop listening for this run (the loop's listener ends with its last run)."""
        if self._listener is not None:
            await stop_watching(self._listener, self._run_id, self._signal)

    async def stop_requested(self) -> StopRequest | None:
        raw = await self._redis.get(keys.stop(self._run_id))
        return StopRequest.model_validate_json(raw) if raw else None

    async def poll(self) -> ControlUpdate:
        update = ControlUpdate(stop=await self.stop_requested())
        upgrades = await self._redis.hgetall(keys.upgrades(self._run_id))
        if len(upgrades) > self.upgrades_seen:
            self.upgrades_seen = len(upgrades)
            profile = text(next(iter(upgrades.values())))  # one upgrade target today: "deep"
            update.budget = budget_for(profile, self._caps)
        raw_notes = await self._redis.lrange(keys.notes(self._run_id), self.notes_seen, -1)
        self.notes_seen += len(raw_notes)
        update.notes = [Note.model_validate_json(raw) for raw in raw_notes]
        return update

    def snapshot(self) -> dict[str, Any]:
        return {"notes_seen": self.notes_seen, "upgrades_seen": self.upgrades_seen}

    def restore(self, snapshot: dict[str, Any] | None) -> None:
        if snapshot:
            self.notes_seen, self.upgrades_seen = snapshot["notes_seen"], snapshot["upgrades_seen"]
