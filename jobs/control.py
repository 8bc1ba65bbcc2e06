"""Run control through Redis: the bot records stops, upgrades and notes; the running loop
reads them at its next step (and polls for a stop while it waits)."""

from __future__ import annotations

from typing import Any

from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from agent.config import Caps, budget_for
from agent.control import ControlUpdate, Note, StopRequest

from . import keys
from .connection import text


def request_stop(redis: Redis, run_id: str, by: str) -> bool:
    """True when this is the first stop for the run (later ones change nothing)."""
    created = redis.set(keys.stop(run_id), StopRequest(by=by).model_dump_json(), nx=True, ex=keys.CONTROL_TTL_SECONDS)
    return bool(created)


def record_upgrade(redis: Redis, run_id: str, event_id: str, profile: str = "deep") -> bool:
    """One upgrade per Slack event id: a retried event upgrades once. True when new."""
    added = redis.hsetnx(keys.upgrades(run_id), event_id, profile)
    redis.expire(keys.upgrades(run_id), keys.CONTROL_TTL_SECONDS)
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
    """What the loop polls. Its cursor (notes and upgrades seen) is saved in checkpoints."""

    def __init__(self, redis: AsyncRedis, run_id: str, caps: Caps) -> None:
        self._redis = redis
        self._run_id = run_id
        self._caps = caps
        self.notes_seen = 0
        self.upgrades_seen = 0

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
