"""Loops beside a piece of work stop between their calls when asked, even where a cancellation
would be swallowed mid-call (redis-py's asyncio client on Python 3.11, when a cancel meets a socket
timeout: seen as a publisher's sync lease renewed for minutes after its sync ended)."""
from __future__ import annotations

import asyncio

from redis.asyncio import Redis as AsyncRedis

from bot import keys
from bot.publishing.leases import Leases
from jobs.process.background import Stop, beside


class SwallowingCall:
    """A call that, like a command whose cancellation met its socket timeout, eats one cancel."""

    def __init__(self) -> None:
        self.calls = 0
        self.swallowed = 0

    async def __call__(self) -> None:
        self.calls += 1
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            self.swallowed += 1  # and carries on as if the call had timed out and been retried


async def renewing(call: SwallowingCall, stop: Stop) -> None:
    while not await stop.pause(0.01):
        await call()


async def test_a_loop_whose_call_swallows_a_cancel_hangs_whoever_cancels_it() -> None:
    # The failure this module exists for, shown with the same hostile call: cancel, then wait.
    call, stop = SwallowingCall(), Stop()
    task = asyncio.create_task(renewing(call, stop))
    while call.calls == 0:
        await asyncio.sleep(0.005)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=1.0)
    assert not done and call.swallowed >= 1, "cancelled mid-call, the loop went on"
    stop.set()  # what beside() does instead; the test cleans up that way
    await asyncio.wait_for(task, 5)


async def test_leaving_beside_stops_the_loop_between_calls_even_if_a_call_would_swallow_a_cancel() -> None:
    call = SwallowingCall()
    async with beside(lambda stop: renewing(call, stop), "renewing") as task:
        while call.calls < 3:
            await asyncio.sleep(0.005)
    assert task.done() and not task.cancelled()
    assert call.swallowed == 0, "never cancelled: asked, and it ended after the call under way"
    calls = call.calls
    await asyncio.sleep(0.1)
    assert call.calls == calls, "no call after leaving"


async def test_a_loop_that_failed_is_left_quietly_and_the_block_goes_on() -> None:
    async def failing(stop: Stop) -> None:
        raise RuntimeError("renewal refused")

    async with beside(failing, "failing") as task:
        await asyncio.sleep(0.01)
    assert isinstance(task.exception(), RuntimeError)


async def test_a_pause_returns_at_once_when_asked_and_after_its_time_otherwise() -> None:
    stop = Stop()
    assert await stop.pause(0.01) is False
    waiting = asyncio.create_task(stop.pause(60))
    await asyncio.sleep(0.01)
    stop.set()
    assert await asyncio.wait_for(waiting, 1) is True and stop.asked


async def test_a_sync_lease_kept_beside_a_sync_is_let_go_when_the_sync_ends(async_redis: AsyncRedis) -> None:
    leases = Leases(async_redis, "owner-1")
    assert await leases.claim("run-1", interval=0, force=True) == 0.0

    async def sync() -> None:
        async with beside(lambda stop: leases.keep("run-1", stop), "lease"):
            await asyncio.sleep(0.05)  # the sync; the keeper is in its pause of a third of the lease

    await asyncio.wait_for(sync(), 5)  # asked, the keeper leaves its pause at once
    await leases.release(keys.sync_lease("run-1"))
    assert await async_redis.get(keys.sync_lease("run-1")) is None
    assert await leases.claim("run-1", interval=0, force=True) == 0.0, "free for the next sync"
