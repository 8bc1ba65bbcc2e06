"""The control channel (jobs/control/control_listener.py, jobs/control/control.py): a run waiting on the model is
woken by the announcement of its stop instead of polling Redis, with a real redis-server.

One subscription per event loop; a message wakes only the runs it names; every (re)subscription
wakes every run once (a message sent while the subscription was down is not redelivered); the last
run to stop watching closes the listener; and agent/guard.py's wait, whose own check is then only a
backstop (BACKSTOP_CHECK_SECONDS, minutes), is cut by the announced stop."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from agent import defaults
from agent.budget import Ledger
from agent.config import Budget, Caps
from agent.control import StopRequest
from agent.exceptions import Interrupted
from agent.guard import guarded
from jobs import keys
from jobs.control.control import BACKSTOP_CHECK_SECONDS, RedisRunControl, announce, request_stop
from jobs.control.control_listener import ControlListener, for_this_loop, stop_watching

# Generous: each wait ends as soon as its condition holds.
WAIT_SECONDS = 10.0


def run_id() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


async def eventually(condition, what: str, seconds: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds:.0f} s: {what}")
        await asyncio.sleep(0.02)


async def woken(event: asyncio.Event, what: str) -> None:
    try:
        await asyncio.wait_for(event.wait(), WAIT_SECONDS)
    except TimeoutError:
        pytest.fail(f"not woken within {WAIT_SECONDS:.0f} s: {what}")


async def interrupted(waiting: asyncio.Task[object], what: str) -> Interrupted:
    """The Interrupted that ends the guarded wait `waiting` within WAIT_SECONDS."""
    try:
        await asyncio.wait_for(waiting, WAIT_SECONDS)
    except Interrupted as cut:
        return cut
    except TimeoutError:
        pytest.fail(f"the guarded wait was not cut within {WAIT_SECONDS:.0f} s by {what}")
    pytest.fail("the guarded wait ended without Interrupted")


@pytest.fixture
async def listener(redis_url: str) -> AsyncIterator[ControlListener]:
    """This loop's listener; whatever a test leaves watched is forgotten, which closes it."""
    listener = for_this_loop(redis_url)
    yield listener
    for watched, events in list(listener._watching.items()):
        for event in list(events):
            await stop_watching(listener, watched, event)
    if listener._task is not None and not listener._task.done():
        await listener.close()


async def subscribed(listener: ControlListener, *events: asyncio.Event) -> None:
    """Wait for the first subscription (which wakes every watched run), then clear its wake."""
    for event in events:
        await woken(event, "the subscription's wake")
    assert listener.subscribed
    for event in events:
        event.clear()


async def test_an_announcement_wakes_the_run_it_names_and_no_other(listener: ControlListener, redis: Redis) -> None:
    named, other = run_id(), run_id()
    named_event, other_event = listener.watch(named), listener.watch(other)
    await subscribed(listener, named_event, other_event)

    announce(redis, run_id())  # a run of another loop: wakes nobody here
    announce(redis, named)
    await woken(named_event, "the announcement of its own run")
    # Messages arrive in order: by the time the named run's was handled, both others had been.
    assert not other_event.is_set()

    announce(redis, other)
    await woken(other_event, "the announcement of the other run")


async def test_every_watched_run_is_woken_once_when_the_listener_subscribes(listener: ControlListener) -> None:
    first, second = listener.watch(run_id()), listener.watch(run_id())
    assert not listener.subscribed and not first.is_set() and not second.is_set()
    await woken(first, "the first subscription")
    await woken(second, "the first subscription")
    assert listener.subscribed


async def test_a_broken_subscription_is_renewed_and_wakes_every_watched_run(
    listener: ControlListener, redis: Redis
) -> None:
    first_run, second_run = run_id(), run_id()
    first, second = listener.watch(first_run), listener.watch(second_run)
    await subscribed(listener, first, second)

    assert redis.client_kill_filter(_type="pubsub") >= 1  # the listener's connection is cut

    # A message published while it was down is lost, so the renewed subscription wakes every run.
    await woken(first, "the resubscription after the connection was killed")
    await woken(second, "the resubscription after the connection was killed")
    await eventually(lambda: listener.subscribed, "subscribed again")
    first.clear()
    announce(redis, first_run)
    await woken(first, "an announcement on the renewed subscription")


async def test_the_last_run_to_stop_watching_closes_the_loop_s_listener(redis_url: str) -> None:
    listener = for_this_loop(redis_url)
    assert for_this_loop(redis_url) is listener  # one per loop
    first_run, second_run = run_id(), run_id()
    first, second = listener.watch(first_run), listener.watch(second_run)
    await subscribed(listener, first, second)
    task = listener._task
    assert task is not None

    await stop_watching(listener, first_run, first)
    assert not task.done() and for_this_loop(redis_url) is listener

    await stop_watching(listener, second_run, second)
    assert task.done() and task.exception() is None
    assert not listener.subscribed
    successor = for_this_loop(redis_url)  # a new run on this loop starts a listener of its own
    assert successor is not listener
    await stop_watching(successor, "nothing watched", asyncio.Event())


async def test_the_stop_check_is_a_backstop_only_while_subscribed(
    listener: ControlListener, async_redis: AsyncRedis
) -> None:
    alone = RedisRunControl(async_redis, run_id(), Caps())
    assert alone.stop_check_seconds() == defaults.STOP_POLL_SECONDS == 0.5

    control = RedisRunControl(async_redis, run_id(), Caps(), listener)
    assert control.stop_check_seconds() == 0.5  # not subscribed yet: it checks as often as before
    await subscribed(listener, control.stop_signal())
    assert control.stop_check_seconds() == BACKSTOP_CHECK_SECONDS > defaults.STOP_POLL_SECONDS
    await control.close()


async def test_a_guarded_wait_is_cut_by_the_announced_stop(
    listener: ControlListener, async_redis: AsyncRedis, redis: Redis
) -> None:
    run = run_id()
    control = RedisRunControl(async_redis, run, Caps(), listener)
    await subscribed(listener, control.stop_signal())
    # Its own check is minutes away: only the announcement can end the wait within the test's limit.
    assert control.stop_check_seconds() == BACKSTOP_CHECK_SECONDS > 6 * WAIT_SECONDS
    never = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(
        guarded(never, "waiting for the model", 3600.0, control=control, ledger=Ledger.start(Budget()), clock=time.monotonic)
    )
    await asyncio.sleep(0.1)  # let it start waiting (the test passes either way)
    assert not waiting.done()

    assert request_stop(redis, run, "<@U1>") is True
    cut = await interrupted(waiting, "the announced stop")
    assert cut.stop is not None and cut.stop.by == "<@U1>"
    assert "stopped by <@U1> while waiting for the model" in str(cut)
    assert never.cancelled()  # the work was cancelled with the wait
    await control.close()


async def test_a_stop_announced_while_the_subscription_was_cut_still_ends_a_guarded_wait(
    listener: ControlListener, async_redis: AsyncRedis, redis: Redis
) -> None:
    """The announcement is lost with the connection (it is published in the same transaction that
    kills it); the renewed subscription's wake is what makes the run check and see the stop."""
    run = run_id()
    control = RedisRunControl(async_redis, run, Caps(), listener)
    await subscribed(listener, control.stop_signal())
    never = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(
        guarded(never, "waiting for the model", 3600.0, control=control, ledger=Ledger.start(Budget()), clock=time.monotonic)
    )
    await asyncio.sleep(0.1)

    with redis.pipeline(transaction=True) as pipeline:
        pipeline.client_kill_filter(_type="pubsub")
        pipeline.set(keys.stop(run), StopRequest(by="<@U1>").model_dump_json())
        pipeline.publish(keys.CONTROL_CHANNEL, run)
        killed, _, receivers = pipeline.execute()
    assert killed >= 1 and receivers == 0  # nobody heard the announcement

    cut = await interrupted(waiting, "the stop recorded while the subscription was cut")
    assert cut.stop is not None and cut.stop.by == "<@U1>"
    await control.close()
