"""A thread shared with another organization stays an outside audience: a continuation is outside
when its parent was, or when the channel has been shared since (bot/slack/audience.py decides)."""
from __future__ import annotations

import pytest
from redis import Redis

from jobs import Run, Runs, RunStatus, RunStore


@pytest.mark.parametrize(("parent_shared", "shared_now", "expected"),
                         [(False, False, False), (False, True, True), (True, False, True), (True, True, True)])
def test_a_continuation_is_outside_once_the_thread_is(redis: Redis, parent_shared: bool, shared_now: bool,
                                                      expected: bool) -> None:
    runs = Runs(RunStore(redis))
    parent = runs.start(Run(team="T1", question="q", channel="C1", thread_ts="1.0", shared_audience=parent_shared))
    runs.store.finish(parent.run.id, RunStatus.completed, "")
    continuation = runs.continue_from(runs.get(parent.run.id), "more", requester="U1", author="<@U1>",
                                      event_id="Ev1", shared_audience=shared_now)
    assert continuation is not None and continuation.state.run.shared_audience is expected
