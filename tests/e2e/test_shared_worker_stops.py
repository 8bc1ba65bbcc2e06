"""A stop reaches a run in a worker carrying many (DEEPTHREAD_WORKER_RUNS > 1) at once, as it reaches a
forked work-horse (killed): RQ's stop command for one job (what a forced stop sends) ends that job's
run with its model request in flight the last, and an uninstall or a revoked bot token does the same
for the workspace's runs, while the other run in the same process goes on. Before, the shared worker
ignored the command (RQ's handler looks for a work-horse to kill) and a run ended from outside kept
asking the model (76 more requests after a revocation). Real serve and worker, the fake Slack and model.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from rq.command import send_stop_job_command
from rq.job import Job

from jobs import RunNotFound, RunStatus, RunStore, keys
from tests.e2e.stack import CHANNEL, fleet, install, post_event, stack_environment, workspaces_stack
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.policies import SteadyRunsPolicy
from tests.fakes.slack import TEAM_ID, FakeSlack, FakeWorkspace, app_mention_event
from tests.processes import wait_for

RUNS = "2"  # the one worker carries both runs
MODEL_SECONDS = 0.2  # each model answer: a run asks again about every half second
WATCH_SECONDS = 5.0  # after the stop: ten more requests of a run that did not stop
# The one request a stopped run may still be seen to make: the one it had in flight.
IN_FLIGHT = 1
ALPHA, BETA = "T0ALPHA", "T0BETA"
CHANNELS = {ALPHA: "C0ALPHA", BETA: "C0BETA"}


class CountingPolicy:
    """Many quick turns for every run; notes when each request was answered, by the run's word
    (the runs' questions hold `alphafund` or `betafund`)."""

    def __init__(self) -> None:
        self.inner = SteadyRunsPolicy(turns=400)
        self.answered: list[tuple[float, str]] = []
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        text = json.dumps(request["messages"])
        who = "alpha" if "alphafund" in text else "beta" if "betafund" in text else "other"
        with self.lock:
            self.answered.append((time.monotonic(), who))
        return self.inner(request)

    def count(self, who: str, after: float = 0.0) -> int:
        with self.lock:
            return sum(name == who and at > after for at, name in self.answered)


def _ended(store: RunStore, run_id: str) -> bool:
    try:
        return store.get(run_id).status.finished
    except RunNotFound:  # an uninstall forgets the run's records too
        return True


def _watch(policy: CountingPolicy, since: float) -> tuple[int, int]:
    time.sleep(WATCH_SECONDS)
    return policy.count("alpha", since), policy.count("beta", since)


def test_rq_stop_of_one_job_ends_its_run_at_once_and_the_other_run_goes_on(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    policy = CountingPolicy()
    fake_model.policy, fake_model.delay = policy, MODEL_SECONDS
    redis = Redis.from_url(redis_url)
    store = RunStore(redis)
    env = {**stack_environment(redis_url, fake_slack, fake_model, fake_web), "DEEPTHREAD_WORKER_RUNS": RUNS}
    with fleet(tmp_path, env, serves=1, workers=1) as running:
        stack = running.serves[0][1]
        threads = {}
        for who in ("alpha", "beta"):
            envelope = app_mention_event(f"What does the {who}fund charge?", channel=CHANNEL)
            threads[who] = fake_slack.seed_event(envelope)
            assert post_event(stack, envelope).status_code == 200
        wait_for(lambda: policy.count("alpha") >= 3 and policy.count("beta") >= 3, 60, "both runs under way")
        [alpha_run] = store.thread_run_ids(TEAM_ID, CHANNEL, threads["alpha"]) or [""]
        job_id = redis.get(keys.current_job(alpha_run)).decode()

        send_stop_job_command(redis, job_id)  # RQ's stop for the job, as a forced stop sends it
        stopped_at = time.monotonic()
        alpha_after, beta_after = _watch(policy, stopped_at)

        assert alpha_after <= IN_FLIGHT, f"the stopped run asked the model {alpha_after} more times"
        assert beta_after >= 3, "the other run of the same process goes on"
        job = Job.fetch(job_id, connection=redis)
        wait_for(lambda: job.get_status(refresh=True) == "stopped", 10, "RQ to record the job stopped")
        log = running.log("worker", 1)
        assert "stopped by RQ's command" in log and "Traceback" not in log, log[-3000:]


@pytest.mark.parametrize("how", ["app_uninstalled", "tokens_revoked"])
def test_a_workspace_that_leaves_has_its_run_in_a_shared_worker_stop_at_once(
        how: str, tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    workspaces: dict[str, FakeWorkspace] = {
        team: fake_slack.add_workspace(team, name=f"Team {team[2:].title()}", channels=(channel,))
        for team, channel in CHANNELS.items()
    }
    policy = CountingPolicy()
    fake_model.policy = policy
    redis = Redis.from_url(redis_url)
    store = RunStore(redis)
    with workspaces_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_WORKER_RUNS=RUNS) as (base, stack):
        for team in CHANNELS:
            assert install(base, team).status_code == 200
        fake_model.delay = MODEL_SECONDS
        threads = {}
        for team, who in ((ALPHA, "alpha"), (BETA, "beta")):
            workspace = workspaces[team]
            envelope = app_mention_event(f"What does the {who}fund charge?", channel=CHANNELS[team],
                                         team_id=team, bot_user_id=workspace.bot_user_id)
            threads[team] = fake_slack.seed_event(envelope)
            assert post_event(stack, envelope).status_code == 200
        wait_for(lambda: policy.count("alpha") >= 3 and policy.count("beta") >= 3, 60, "both runs under way")
        [alpha_run] = store.thread_run_ids(ALPHA, CHANNELS[ALPHA], threads[ALPHA]) or [""]

        envelope = fake_slack.uninstall(ALPHA) if how == "app_uninstalled" else fake_slack.revoke_bot_token(ALPHA)
        assert post_event(stack, envelope).status_code == 200
        wait_for(lambda: _ended(store, alpha_run), 20, "Alpha's run to be stopped")
        stopped_at = time.monotonic()
        alpha_after, beta_after = _watch(policy, stopped_at)

        assert alpha_after <= IN_FLIGHT, f"Alpha's run asked the model {alpha_after} more times after it was stopped"
        assert beta_after >= 3, "Beta's run, in the same worker process, goes on"
        if how == "tokens_revoked":
            assert store.get(alpha_run).status == RunStatus.stopped
