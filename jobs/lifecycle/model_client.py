"""The model client of a job: the configured provider's SDK client (the Anthropic API, Bedrock or
Vertex) and the shared limiter its run's requests ask (agent/run.py puts the limiter's middleware
on the client). One place, so the research job, the plan-first job and inline runs build it alike
(and planning.py need not import executor.py, which imports planning.py)."""

from __future__ import annotations

from redis.asyncio import Redis as AsyncRedis

from agent.model_provider import ModelAPI, model_api

from ..budgets.capacity import RedisModelLimiter
from .runtime import JobRuntime

__all__ = ["model_client", "model_limiter"]


def model_client(runtime: JobRuntime) -> ModelAPI:
    """The SDK client of the configured provider, giving up on a service that sends nothing."""
    return model_api(runtime.provider_config(), silence=runtime.model_silence, watch=runtime.model_watch)


def model_limiter(async_redis: AsyncRedis, runtime: JobRuntime) -> RedisModelLimiter:
    """The deployment's shared model capacity, with the operator's limits (else headers, else learned)."""
    return RedisModelLimiter(async_redis, runtime.model_limits)
