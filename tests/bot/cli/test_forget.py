"""`deepthread forget --team T [--channel C] [--thread TS]`: deletes that thread's, channel's or
workspace's stored data now and says what went; a thread needs its channel."""
from __future__ import annotations

import subprocess

from redis import Redis

from jobs import Run, RunStatus, RunStore, keys
from tests.helpers import keys_holding
from tests.processes import DEEPTHREAD, ROOT, environment


def _forget(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(DEEPTHREAD + ["forget", *args], env=environment(REDIS_URL=redis_url), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def _thread(redis: Redis, team: str, channel: str, ts: str) -> str:
    store = RunStore(redis)
    state = store.create(Run(question=f"question in {channel} {ts}", team=team, channel=channel, thread_ts=ts))
    store.finish(state.run.id, RunStatus.completed, "")
    redis.set(keys.result(state.run.id, "r1"), "page text")
    return state.run.id


def test_forget_deletes_the_thread_the_channel_or_the_workspace_it_names(redis: Redis, redis_url: str) -> None:
    one, two = _thread(redis, "T1", "C1", "1.0"), _thread(redis, "T1", "C1", "2.0")
    other_channel, other_team = _thread(redis, "T1", "C2", "1.0"), _thread(redis, "T2", "C1", "1.0")

    said = _forget(redis_url, "--team", "T1", "--channel", "C1", "--thread", "1.0")
    assert said.returncode == 0, said.stderr
    assert "Deleted 1 run in 1 thread" in said.stdout and one in said.stdout
    assert not keys_holding(redis, one) and redis.exists(keys.run_state(two))

    assert _forget(redis_url, "--team", "T1", "--channel", "C1").returncode == 0
    assert not keys_holding(redis, two) and redis.exists(keys.run_state(other_channel))

    assert _forget(redis_url, "--team", "T1").returncode == 0
    assert not keys_holding(redis, other_channel) and not redis.keys("*:T1:*")
    assert redis.exists(keys.run_state(other_team)), "another workspace's runs stay"


def test_a_thread_without_its_channel_is_refused(redis_url: str) -> None:
    said = _forget(redis_url, "--team", "T1", "--thread", "1.0")
    assert said.returncode == 2 and "--thread needs --channel" in said.stderr
