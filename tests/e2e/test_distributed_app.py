"""DEEPTHREAD_SLACK_DISTRIBUTED: a run of an app Slack allows one thread read a minute (15 messages) reads
its thread from the events serve kept and one page a minute, and never meets a 429; the mention that
started it is kept for it. Real serve and worker processes against the fake Slack enforcing that limit."""
from __future__ import annotations

from pathlib import Path

from redis import Redis

from bot.slack.thread_log import ThreadLog
from tests.e2e.stack import CHANNEL, block_text, post_event
from tests.fakes.slack import TEAM_ID, FakeSlack, app_mention_event
from tests.processes import deepthread_stack, wait_for


def test_a_distributed_apps_run_reads_its_long_thread_without_a_429(tmp_path: Path, redis_url: str,
                                                                     fake_slack: FakeSlack, fake_model,
                                                                     fake_web) -> None:
    fake_slack.distributed_app()  # one conversations.replies a minute, 15 messages each
    fake_model.delay = 0.4  # turns take a moment: the run looks at its thread several times
    root = fake_slack.add_user_message(CHANNEL, "we are choosing an index fund", "U0BEN")
    for n in range(30):
        fake_slack.add_user_message(CHANNEL, f"earlier reply {n}", "U0BEN", thread_ts=root)
    envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=CHANNEL, thread_ts=root)
    mention_ts = fake_slack.seed_event(envelope)
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_SLACK_DISTRIBUTED="on") as stack:
        assert post_event(stack, envelope).status_code == 200
        [report] = wait_for(lambda: fake_slack.pins(CHANNEL), 20, "the pinned report")
        wait_for(lambda: "Final" in block_text(fake_slack.message(CHANNEL, report.ts)), 60, "the final report")
    kept = ThreadLog(Redis.from_url(redis_url), ttl_seconds=1).messages(TEAM_ID, CHANNEL, root)
    assert [m["ts"] for m in kept] == [mention_ts], "the mention's event is kept for the run"
    reads = fake_slack.calls_of("conversations.replies")
    assert reads and all(int(r["limit"]) <= 15 for r in reads), reads
    assert fake_slack.count_429.get("conversations.replies", 0) == 0, "never faster than Slack allows"
    assert "thread files unavailable" not in (tmp_path / "worker.log").read_text()
