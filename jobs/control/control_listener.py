"""How a waiting run hears of a stop without polling Redis: one subscription per event loop.

The bot publishes a run's id on the deployment's control channel (keys.CONTROL_CHANNEL) when it
asks the run to stop or raises its budget. Every run on a loop shares one pub/sub connection
here; a message wakes the runs it names (agent/guard.py then reads the stop once). A message sent
while the subscription was down is not redelivered, so every (re)subscription wakes every run to
check once, and while the subscription is down runs check as often as they did before notifications
(RedisRunControl.stop_check_seconds).

The listening loop reads with a timeout and is stopped between reads, never cancelled mid-call
(jobs/process/background.py says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redis.asyncio import Redis as AsyncRedis

from ..keyspace import keys
from ..keyspace.connection import connect_async, text
from ..process.background import Stop

__all__ = ["ControlListener", "for_this_loop", "stop_watching"]

log = logging.getLogger(__name__)

# One read's wait: how soon the listener notices it was asked to stop (no Redis command is sent);
# a run's end waits for it, so it is short.
READ_SECONDS = 0.1
# After a lost subscription, the wait before subscribing again.
RESUBSCRIBE_SECONDS = 1.0


class ControlListener:
    """The control channel's messages, handed to the runs of one event loop that watch for them."""

    def __init__(self, redis: AsyncRedis) -> None:
        self._redis = redis
        self._watching: dict[str, set[asyncio.Event]] = {}
        self._stop = Stop()
        self._task: asyncio.Task[None] | None = None
        self.subscribed = False  # False: messages may be missed; runs then check on their own

    def watch(self, run_id: str) -> asyncio.Event:
        """An event set whenever `run_id` is named on the channel (and on every resubscription)."""
        event = asyncio.Event()
        self._watching.setdefault(run_id, set()).add(event)
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name="control-listener")
        return event

    def forget(self, run_id: str, event: asyncio.Event) -> bool:
        """Stop handing `run_id`'s messages to `event`; True when nothing is watched any more."""
        events = self._watching.get(run_id, set())
        events.discard(event)
        if not events:
            self._watching.pop(run_id, None)
        return not self._watching

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.wait([self._task])
        await self._redis.aclose()

    def _wake(self, run_id: str) -> None:
        for event in self._watching.get(run_id, ()):
            event.set()

    def _wake_all(self) -> None:
        for run_id in list(self._watching):
            self._wake(run_id)

    async def _listen(self) -> None:
        while not self._stop.asked:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(keys.CONTROL_CHANNEL)
                self.subscribed = True
                self._wake_all()  # whatever was published before this subscription: each run checks once
                while not self._stop.asked:
                    message = await pubsub.get_message(timeout=READ_SECONDS)
                    if message is not None and message.get("type") == "message":
                        self._wake(text(message["data"]))
            except Exception as exc:  # Redis away or failing over: runs check by themselves meanwhile
                if self.subscribed:
                    log.warning("control channel subscription lost (%s); subscribing again", exc)
                self.subscribed = False
                self._wake_all()
                await self._stop.pause(RESUBSCRIBE_SECONDS)
            finally:
                self.subscribed = False
                with contextlib.suppress(Exception):
                    await pubsub.aclose()


_listeners: dict[asyncio.AbstractEventLoop, ControlListener] = {}


def for_this_loop(redis_url: str) -> ControlListener:
    """The running loop's listener, started with its own connection on first use."""
    loop = asyncio.get_running_loop()
    listener = _listeners.get(loop)
    if listener is None:
        # No retry window: redis-py would reconnect and resubscribe inside get_message, silently,
        # and whatever was announced meanwhile would be lost unseen. The listener reconnects itself,
        # so it knows to wake every run to check.
        listener = _listeners[loop] = ControlListener(connect_async(redis_url, retry_window=0))
    return listener


async def stop_watching(listener: ControlListener, run_id: str, event: asyncio.Event) -> None:
    """Forget the watch; the last one on a loop closes its listener (a new run starts another)."""
    if listener.forget(run_id, event):
        loop = asyncio.get_running_loop()
        if _listeners.get(loop) is listener:
            del _listeners[loop]
        await listener.close()
