"""Two deployments on one Redis (DEEPTHREAD_REDIS_PREFIX, DEEPTHREAD_QUEUE): each a serve and a worker
of its own, real processes, one database. Each answers its own mention; neither sees, runs nor
publishes the other's run."""
from __future__ import annotations

from pathlib import Path

from redis import Redis

from jobs import RunStatus, RunStore, keys
from tests.e2e.stack import assert_cited_report_pinned, fleet, stack_environment, start
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import ResearchPolicy
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_records import TEAM_ID


def test_two_deployments_sharing_a_redis_never_see_each_others_runs(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.policy = ResearchPolicy()
    base = stack_environment(redis_url, fake_slack, fake_model, fake_web)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with fleet(tmp_path / "a", {**base, "DEEPTHREAD_REDIS_PREFIX": "team-a"}) as team_a, \
            fleet(tmp_path / "b", {**base, "DEEPTHREAD_REDIS_PREFIX": "team-b", "DEEPTHREAD_QUEUE": "b-research"}) as team_b:
        thread_a, _, _ = start(team_a.serves[0][1], fake_slack, "expense ratio VTI", channel="C0TEAMA")
        thread_b, _, _ = start(team_b.serves[0][1], fake_slack, "expense ratio SCHB", channel="C0TEAMB")
        assert_cited_report_pinned(fake_slack, thread_a, fake_web.url, timeout=60, channel="C0TEAMA")
        assert_cited_report_pinned(fake_slack, thread_b, fake_web.url, timeout=60, channel="C0TEAMB")

        redis = Redis.from_url(redis_url)
        runs = {}
        for prefix, channel, thread in (("team-a", "C0TEAMA", thread_a), ("team-b", "C0TEAMB", thread_b)):
            keys.configure(prefix=prefix)
            try:
                store = RunStore(redis)
                [runs[prefix]] = store.thread_run_ids(TEAM_ID, channel, thread)
                assert store.get(runs[prefix]).status == RunStatus.completed
                other_channel = "C0TEAMB" if prefix == "team-a" else "C0TEAMA"
                other_thread = thread_b if prefix == "team-a" else thread_a
                assert store.thread_run_ids(TEAM_ID, other_channel, other_thread) == [], "the other team's thread is unknown"
            finally:
                keys.configure()
        ours = {k.decode() for k in redis.keys("*") if not k.startswith(b"rq:")}
        assert ours and all(k.startswith(("team-a:", "team-b:")) for k in ours), sorted(ours)[:10]
        assert not any(runs["team-b"] in k for k in ours if k.startswith("team-a:")), "no key of B's run under A"
        assert not any(runs["team-a"] in k for k in ours if k.startswith("team-b:")), "no key of A's run under B"
        assert runs["team-b"] not in team_a.logs_of("worker") and runs["team-a"] in team_a.logs_of("worker")
        assert runs["team-a"] not in team_b.logs_of("worker") and runs["team-b"] in team_b.logs_of("worker")
