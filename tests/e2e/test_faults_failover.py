"""Fault: the Redis primary dies mid-run and Sentinel promotes its replica. Real processes on loopback:
a redis-server primary, a replica and three `redis-server --sentinel`, `deepthread serve` and
`deepthread worker` given REDIS_URL=redis+sentinel://…; the primary is SIGKILLed while the run
researches. serve, the worker and the running job find the new primary through the sentinels; the
run finishes with one complete pinned report, and a new mention afterwards works."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs import RunStatus, RunStore
from jobs.keyspace.connection import connect
from tests.e2e.stack import assert_cited_report_pinned, block_text, report_text, start
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import MARKER, FaultAtTurnThree, ResearchPolicy
from tests.fakes.slack import FakeSlack
from tests.processes import SentinelTopology, deepthread_stack, wait_for
from tests.fakes.slack_records import TEAM_ID

OTHER_CHANNEL = "C0AFTER"


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelTopology]:
    topology = SentinelTopology(tmp_path / "redis").start()
    yield topology
    topology.stop()


def test_a_run_survives_its_primary_dying_and_a_new_mention_works_after_the_failover(
        tmp_path: Path, sentinels: SentinelTopology, fake_slack: FakeSlack, fake_model: FakeAnthropic,
        fake_web) -> None:
    killed: list[int] = []
    fake_model.policy = FaultAtTurnThree(lambda: killed.append(sentinels.kill_primary()))
    with deepthread_stack(tmp_path, redis_url=sentinels.url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url) as stack:
        thread, progress_ts, report_ts = start(stack, fake_slack, "expense ratio and tracking error of VTI ITOT SCHB")
        wait_for(lambda: killed, 30, "the primary to be killed mid-run")
        new_primary = sentinels.wait_for_failover(killed[0])
        sentinels.revive(killed[0])  # the machine comes back as a replica: the new primary takes writes again
        progress, report = assert_cited_report_pinned(fake_slack, thread, fake_web.url, timeout=90)
        assert (progress.ts, report.ts) == (progress_ts, report_ts)
        text = report_text(fake_slack, report_ts)
        assert "*1. Fees*  _revised ×1_" in text and "*2. Tracking*" in text, "both sections, the revision counted"

        redis = connect(sentinels.url)
        # The primary the sentinels name now: on a loaded machine they may have moved it again since
        # (the revived server is a replica like any other), and the client follows whichever it is.
        assert redis.connection_pool.get_master_address()[1] == sentinels.primary()[1], "everyone follows the sentinels"
        assert new_primary != killed[0]
        state = RunStore(redis).get(RunStore(redis).thread_run_ids(TEAM_ID, "C0TEST", thread)[0])
        assert state.status == RunStatus.completed
        seen = {m.strip("[]") for r in fake_model.requests for m in MARKER.findall(json.dumps(r["messages"]))}
        assert seen <= set(state.sources), f"sources lost: {sorted(seen - set(state.sources))}"
        fees = next(s for s in state.sections if s.title == "Fees")
        assert [r.reason for r in fees.revisions] == ["a newer fact sheet"]

        fake_model.policy = ResearchPolicy()  # a fresh question after the failover
        after, _, after_report = start(stack, fake_slack, "expense ratio VTI SCHB ITOT", channel=OTHER_CHANNEL,
                                       timeout=30)
        assert_cited_report_pinned(fake_slack, after, fake_web.url, timeout=60, channel=OTHER_CHANNEL)
        assert "Final" in block_text(fake_slack.message(OTHER_CHANNEL, after_report))
