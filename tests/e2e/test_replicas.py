"""Past one machine: two `deepthread serve` replicas (HTTP mode, as behind a load balancer) and two
workers on one Redis, real processes on loopback. Events alternate between the replicas, Slack's
retry of each event arrives at the other one, and one replica is SIGKILLed mid-run while it is
posting a new run's messages. Every thread ends with exactly one progress message and one pinned
report, final and cited; nothing is posted twice."""
from __future__ import annotations

from pathlib import Path

from redis import Redis

from jobs import RunStatus, RunStore
from tests.e2e.stack import CHANNEL, block_text, bot_replies, fleet, post_event, stack_environment
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import SteadyRunsPolicy
from tests.fakes.slack import FakeSlack, app_mention_event
from tests.processes import kill_tree, wait_for
from tests.fakes.slack_records import TEAM_ID

QUESTIONS = ["expense ratio VTI", "expense ratio SCHB", "expense ratio ITOT", "tracking error VTI ITOT SCHB"]
# The post that is in flight when its replica dies: its answer is held this long (the replica is gone by then).
HELD_ANSWER_SECONDS = 20.0


def mention(stacks, fake_slack: FakeSlack, text: str, to: int) -> str:
    """Mention the bot through replica `to`, then deliver Slack's retry of the same event to the other."""
    envelope = app_mention_event(text, channel=CHANNEL)
    thread = fake_slack.seed_event(envelope)
    assert post_event(stacks[to], envelope).status_code == 200
    retry = post_event(stacks[1 - to], envelope, headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "timeout"})
    assert retry.status_code == 200
    return thread


def test_two_replicas_with_retries_crossing_and_one_killed_mid_run_post_each_message_once(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.delay = 0.3
    fake_model.policy = SteadyRunsPolicy(turns=14)
    env = stack_environment(redis_url, fake_slack, fake_model, fake_web)
    with fleet(tmp_path, env, serves=2, workers=2) as running:
        stacks = [stack for _, stack in running.serves]
        threads = [mention(stacks, fake_slack, question, to=n % 2) for n, question in enumerate(QUESTIONS)]
        wait_for(lambda: all(len(bot_replies(fake_slack, t)) >= 2 for t in threads), 30, "every run's messages")

        # A run whose first post is in flight on replica 0 when it dies: Slack stores the message,
        # the answer never reaches the replica.
        fake_slack.answer_late("chat.postMessage", delay=HELD_ANSWER_SECONDS)
        orphan = mention(stacks, fake_slack, "fees of VTI and SCHB, and who is cheaper", to=0)
        wait_for(lambda: bot_replies(fake_slack, orphan), 20, "the in-flight post to land in Slack")
        kill_tree(running.serves[0][0])
        threads.append(orphan)

        def finished(thread: str) -> bool:
            replies = bot_replies(fake_slack, thread)
            return (len(replies) >= 2 and "Final" in block_text(fake_slack.message(CHANNEL, replies[1].ts))
                    and "Done" in block_text(fake_slack.message(CHANNEL, replies[0].ts)))

        wait_for(lambda: all(finished(t) for t in threads), 180, "every run to end in Slack")

        for thread in threads:
            replies = bot_replies(fake_slack, thread)
            assert len(replies) == 2, f"thread {thread}: one progress message and one report, not {len(replies)}"
        pinned = sorted(p.ts for p in fake_slack.pins(CHANNEL))
        assert pinned == sorted(bot_replies(fake_slack, t)[1].ts for t in threads), "each report pinned, once"
        posts = [p for p in fake_slack.calls_of("chat.postMessage") if p.get("thread_ts") in threads]
        assert len(posts) == 2 * len(threads), "nothing was posted twice"

        store = RunStore(Redis.from_url(redis_url))
        for thread in threads:
            [run_id] = store.thread_run_ids(TEAM_ID, CHANNEL, thread)  # the retries started nothing
            state = store.get(run_id)
            assert state.status == RunStatus.completed
            progress, report = bot_replies(fake_slack, thread)
            assert (state.run.progress_message, state.run.report_message) == (progress.ts, report.ts)
        survivor = running.log("serve", 2)
        assert "was never shown in Slack" in survivor, "the surviving replica finished posting the orphan"
        assert "adopting it" in survivor, "and adopted the message the dead replica had posted"
