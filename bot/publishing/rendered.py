"""What Slack shows for each run, as the publisher last sent it.

One hash per run, `deepthread:rendered:{run}`: the digest of the progress and report
messages as last sent (so an unchanged rendering is never sent again) and the assistant
status with when it was set. The mention listener writes the first digests when it posts
the messages; the publisher keeps them up to date.
"""

from __future__ import annotations

from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from bot import keys
from jobs.keyspace.connection import text

__all__ = ["RENDERED_TTL_SECONDS", "forget", "remember", "remember_rendered", "shown", "status_shown"]

RENDERED_TTL_SECONDS = 90 * 24 * 3600  # as long as run state is kept


def remember_rendered(redis: Redis, run_id: str, *, progress: str, report: str) -> None:
    """The digests of the messages just posted (the listener's side, synchronous Redis)."""
    redis.hset(keys.rendered(run_id), mapping={"progress": progress, "report": report})
    redis.expire(keys.rendered(run_id), RENDERED_TTL_SECONDS)


async def remember(redis: AsyncRedis, run_id: str, fields: dict[str, str | float]) -> None:
    await redis.hset(keys.rendered(run_id), mapping=fields)  # type: ignore[arg-type]
    await redis.expire(keys.rendered(run_id), RENDERED_TTL_SECONDS)


async def forget(redis: AsyncRedis, run_id: str, name: str) -> None:
    """What the run showed in one message is no longer known: its next sync sends it again."""
    await redis.hdel(keys.rendered(run_id), name)


async def shown(redis: AsyncRedis, run_id: str) -> dict[str, str]:
    return {text(k): text(v) for k, v in (await redis.hgetall(keys.rendered(run_id))).items()}


async def status_shown(redis: AsyncRedis, run_id: str) -> tuple[str | None, float]:
    """The status last set for this run (None: never) and when (epoch seconds)."""
    have, at = await redis.hmget(keys.rendered(run_id), ["status", "status_at"])
    return (text(have) if have is not None else None), float(text(at)) if at else 0.0
