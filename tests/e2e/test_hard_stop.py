"""The hard stop is durable: the fallback after a stop is a deadline in Redis, carried out by
whichever process is alive (serve or an idle worker), so a restart of serve cannot lose it.
Real serve and worker processes, real Redis, fake Slack/model/web."""
from __future__ import annotations

import re
import subprocess

from redis import Redis

from agent import Finished
from jobs import Run, Runs, RunStatus, RunStore, keys
from jobs.control.hard_stop import claim_due
from tests.e2e.stack import CHANNEL, block_text, post_event, serve_only, stack_environment, start
from tests.e2e.stack import report_text as report
from tests.fakes.policies import SteadyPolicy, slow_page
from tests.fakes.slack import TEAM_ID, reaction_added_event
from tests.processes import Stack, running, wait_for

GRACE_SECONDS = 3
# The stop's final-answer turn hangs far longer than the grace: only the hard stop ends the run.
STUCK_MODEL_SECONDS = 120


def _runs(redis: Redis, grace: float = GRACE_SECONDS) -> Runs:
    return Runs(RunStore(redis), hard_stop_seconds=grace)


def _new_run(runs: Runs, run_id: str) -> str:
    runs.start(Run(id=run_id, question="q", channel=CHANNEL, thread_ts=f"17000000{len(run_id)}.{run_id[-4:]}",
                   requester="U0ANA"))
    return run_id


# --- the deadline and its claim, on a real Redis ---------------------------------------------


def test_a_stop_records_its_deadline_once_and_a_second_request_does_not_move_it(redis: Redis) -> None:
    runs = _runs(redis, grace=60)
    run_id = _new_run(runs, "run-deadline-0001")
    assert runs.request_stop(run_id, "<@U0ANA>") is True
    due = redis.zscore(keys.HARD_STOPS, run_id)
    seconds, _ = redis.time()
    assert due is not None and seconds + 59 <= due <= seconds + 61
    assert runs.request_stop(run_id, "<@U0BEN>") is False, "already stopping"
    assert redis.zscore(keys.HARD_STOPS, run_id) == due
    assert runs.force_due_stops() == [], "not due yet"
    assert not runs.get(run_id).status.finished


def _due_now(redis: Redis) -> bool:
    seconds, micros = redis.time()
    return bool(redis.zrangebyscore(keys.HARD_STOPS, "-inf", seconds + micros / 1e6))


def test_a_due_stop_is_forced_by_exactly_one_of_two_racing_processes(redis: Redis, redis_url: str) -> None:
    first, second = _runs(redis, grace=0.01), _runs(Redis.from_url(redis_url))  # two clients, as two processes
    run_id = _new_run(first, "run-race-0002")
    first.request_stop(run_id, "<@U0ANA>")
    wait_for(lambda: _due_now(redis), 5, "the deadline")
    forced = first.force_due_stops() + second.force_due_stops()
    assert forced == [run_id]
    state = first.get(run_id)
    assert state.status == RunStatus.stopped
    assert state.reason == "stopped by <@U0ANA> (forced after 0.01 s)"
    assert redis.zcard(keys.HARD_STOPS) == 0 and not redis.hexists(keys.HARD_STOP_REASONS, run_id)


def test_a_stop_claimed_by_a_process_that_died_falls_due_again_for_another(redis: Redis) -> None:
    runs = _runs(redis, grace=0.01)
    run_id = _new_run(runs, "run-lease-0004")
    runs.request_stop(run_id, "<@U0ANA>")
    wait_for(lambda: _due_now(redis), 5, "the deadline")
    assert [d.run_id for d in claim_due(redis, lease_seconds=0.05)] == [run_id]  # ... and never says done
    assert runs.force_due_stops() == [], "claimed: not forced twice at once"
    wait_for(lambda: _due_now(redis), 5, "the claim's lease to run out")
    assert runs.force_due_stops() == [run_id]
    assert runs.get(run_id).status == RunStatus.stopped


def test_a_run_that_wound_down_in_time_keeps_its_own_ending(redis: Redis) -> None:
    runs = _runs(redis, grace=0.01)
    run_id = _new_run(runs, "run-ended-0003")
    runs.request_stop(run_id, "<@U0ANA>")
    state = runs.get(run_id)
    runs.store.apply(state, Finished(status="stopped", reason="stopped by <@U0ANA>", summary="What it found."))
    wait_for(lambda: _due_now(redis), 5, "the deadline to pass")
    assert runs.force_due_stops() == []
    assert redis.zcard(keys.HARD_STOPS) == 0, "the deadline is gone all the same"
    assert runs.get(run_id).reason == "stopped by <@U0ANA>", "not overwritten by the forced reason"


# --- with real processes -----------------------------------------------------------------------


def _stop_then_crash_serve(stack: Stack, serve: subprocess.Popen[bytes], redis: Redis, fake_slack, fake_model,
                           fake_web) -> tuple[str, str, str]:
    """Start a run, let it write a section, make its final turn hang, stop it by reaction, and
    kill serve (SIGKILL, like a crash or a deploy) as soon as the stop is recorded.
    Returns (run id, progress ts, report ts)."""
    fake_web.slow_seconds = 40
    fake_model.policy = SteadyPolicy(turns=50, slow_url=slow_page(fake_web))
    _, progress, report_ts = start(stack, fake_slack)
    wait_for(lambda: "Fees" in report(fake_slack, report_ts), 20, "the first section")
    run = _runs(redis).run_of_message(TEAM_ID, CHANNEL, report_ts)
    assert run is not None
    fake_model.delay = STUCK_MODEL_SECONDS
    reaction = reaction_added_event("octagonal_sign", user="U0ANA", item_channel=CHANNEL, item_ts=report_ts)
    assert post_event(stack, reaction).status_code == 200
    wait_for(lambda: redis.exists(keys.stop(run.run.id)), 10, "the stop to be recorded")
    serve.kill()
    serve.wait(5)
    assert redis.zscore(keys.HARD_STOPS, run.run.id) is not None, "the deadline outlives serve"
    return run.run.id, progress, report_ts


def test_a_restarted_serve_forces_a_stop_requested_before_the_crash(tmp_path, redis_url, fake_slack, fake_model,
                                                                    fake_web) -> None:
    redis = Redis.from_url(redis_url)
    env = stack_environment(redis_url, fake_slack, fake_model, fake_web, hard_stop_seconds=GRACE_SECONDS)
    with running(["worker"], env, tmp_path / "worker.log", new_session=True):
        with serve_only(env, tmp_path / "serve1.log") as (serve, stack):
            run_id, progress, report_ts = _stop_then_crash_serve(stack, serve, redis, fake_slack, fake_model, fake_web)
        assert _runs(redis).get(run_id).status == RunStatus.running, "the final turn hangs: nothing ended it yet"
        with serve_only(env, tmp_path / "serve2.log"):
            wait_for(lambda: "forced after" in report(fake_slack, report_ts), 20, "the forced stop in the report")
            wait_for(lambda: "Stopped" in block_text(fake_slack.message(CHANNEL, progress)), 10, "the progress line")
    text = report(fake_slack, report_ts)
    assert re.search(rf"Stopped by (<@|&lt;@)U0ANA(>|&gt;) \(forced after {GRACE_SECONDS} s\)", text), text
    assert "Fees" in text and "VTI charges the lowest fee" in text, "the report keeps its sections"
    state = _runs(redis).get(run_id)
    assert state.status == RunStatus.stopped and state.reason.endswith(f"(forced after {GRACE_SECONDS} s)")
    assert redis.zcard(keys.HARD_STOPS) == 0


def test_an_idle_worker_forces_the_stop_while_serve_is_down(tmp_path, redis_url, fake_slack, fake_model,
                                                            fake_web) -> None:
    redis = Redis.from_url(redis_url)
    env = stack_environment(redis_url, fake_slack, fake_model, fake_web, hard_stop_seconds=GRACE_SECONDS)
    with running(["worker"], env, tmp_path / "worker1.log", new_session=True):
        with serve_only(env, tmp_path / "serve.log") as (serve, stack):
            run_id, _, _ = _stop_then_crash_serve(stack, serve, redis, fake_slack, fake_model, fake_web)
        # The first worker is busy with the stuck run; a second, idle one checks the deadlines.
        with running(["worker"], env, tmp_path / "worker2.log", new_session=True):
            wait_for(lambda: _runs(redis).get(run_id).status.finished, 40, "the forced stop")
            wait_for(lambda: "not wound down in time after its stop; forced" in (tmp_path / "worker2.log").read_text(),
                     10, "the idle worker to say it forced the stop")
    state = _runs(redis).get(run_id)
    assert state.status == RunStatus.stopped
    assert state.reason == f"stopped by <@U0ANA> (forced after {GRACE_SECONDS} s)"
    assert state.sections and state.sections[0].title == "Fees", "the sections stay"
