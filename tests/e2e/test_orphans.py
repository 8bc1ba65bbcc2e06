"""Orphans: a run recorded but never launched, or launched but never shown in Slack (serve died
in between), is recovered (a worker launches it, serve posts it) or ended with its reason.
Real serve and worker processes, real Redis, fake Slack/model/web."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from redis import Redis

from agent.events import utcnow
from jobs import Run, Runs, RunStatus, RunStore, keys
from tests.e2e.stack import CHANNEL, block_text, bot_replies, serve_only, stack_environment
from tests.fakes.policies import SteadyPolicy
from tests.fakes.slack import app_mention_event
from tests.processes import deepthread_stack, wait_for

QUESTION = "expense ratio VTI SCHB ITOT"
# Recorded this long ago: past both graces (launching and posting), so no test waits them out.
ABANDONED_AGO = timedelta(minutes=10)


def _abandoned_run(redis: Redis, fake_slack, *, launched: bool, ago: timedelta = ABANDONED_AGO) -> tuple[Run, str]:
    """What a serve process that died mid-mention leaves behind: the run recorded (and launched,
    if `launched`), its messages never posted. Returns the run and its thread ts."""
    thread = fake_slack.seed_event(app_mention_event(QUESTION, channel=CHANNEL))
    run = Run(channel=CHANNEL, thread_ts=thread, requester="U0ANA", question=QUESTION, created_at=utcnow() - ago)
    runs = Runs(RunStore(redis))
    runs.start(run)
    if launched:
        runs.launch(run)
    return run, thread


# --- the listing, on a real Redis ----------------------------------------------------------------


def test_only_runs_unposted_past_the_grace_are_listed_and_one_process_claims_each(redis: Redis, fake_slack) -> None:
    runs = Runs(RunStore(redis))
    old, _ = _abandoned_run(redis, fake_slack, launched=False)
    posted, _ = _abandoned_run(redis, fake_slack, launched=False)
    runs.attach_messages(posted.id, progress="1.1", report="1.2")
    _abandoned_run(redis, fake_slack, launched=False, ago=timedelta(seconds=0))  # still being set up
    assert [s.run.id for s in runs.unposted(60)] == [old.id]
    assert runs.claim_posting(old.id, 60) is True
    assert runs.claim_posting(old.id, 60) is False, "another serve process leaves it alone"


# --- with real processes ---------------------------------------------------------------------------


@pytest.mark.parametrize("launched", [False, True], ids=["recorded-never-launched", "launched-never-posted"])
def test_an_abandoned_run_is_launched_posted_pinned_and_finishes(launched: bool, tmp_path: Path, redis_url: str,
                                                                 fake_slack, fake_model, fake_web) -> None:
    redis = Redis.from_url(redis_url)
    fake_model.policy = SteadyPolicy(turns=4)
    run, thread = _abandoned_run(redis, fake_slack, launched=launched)
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url):
        wait_for(lambda: len(bot_replies(fake_slack, thread)) >= 2, 30, "the run's messages in its thread")
        progress, report = bot_replies(fake_slack, thread)[:2]
        wait_for(lambda: "Final" in block_text(fake_slack.message(CHANNEL, report.ts)), 60, "the final report")
        wait_for(lambda: "Done" in block_text(fake_slack.message(CHANNEL, progress.ts)), 20, "the progress line")
    assert [p.ts for p in fake_slack.pins(CHANNEL)] == [report.ts], "the report is pinned"
    assert len(bot_replies(fake_slack, thread)) == 2, "posted once"
    state = Runs(RunStore(redis)).get(run.id)
    assert state.status == RunStatus.completed
    assert (state.run.progress_message, state.run.report_message) == (progress.ts, report.ts), \
        "reactions and buttons on either message find the run"
    assert redis.zcard(keys.UNPOSTED) == 0
    # Serve sweeps too (an idle RQ worker runs only its maintenance): whichever process came first.
    sweeps = sum((tmp_path / log).read_text().count("queued again") for log in ("worker.log", "serve.log"))
    assert sweeps == (0 if launched else 1), "only the never-launched run needed the sweep, and one sweep took it"


def test_an_abandoned_run_slack_refuses_to_show_is_ended_with_the_reason(tmp_path: Path, redis_url: str, fake_slack,
                                                                        fake_model, fake_web) -> None:
    redis = Redis.from_url(redis_url)
    run, thread = _abandoned_run(redis, fake_slack, launched=False)
    fake_slack.fail_next("chat.postMessage", error="not_in_channel")
    with serve_only(stack_environment(redis_url, fake_slack, fake_model, fake_web), tmp_path / "serve.log"):
        wait_for(lambda: Runs(RunStore(redis)).get(run.id).status.finished, 30, "the run to end")
    state = Runs(RunStore(redis)).get(run.id)
    assert state.status == RunStatus.failed
    assert state.reason == "could not post in this channel (not_in_channel); invite the bot and ask again"
    assert redis.zcard(keys.UNPOSTED) == 0, "not tried again"
    assert not bot_replies(fake_slack, thread)
