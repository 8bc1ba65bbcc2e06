"""One worker process carrying many runs at once (DEEPTHREAD_WORKER_RUNS), real processes on loopback:
each run is still an RQ job (RQ's registries, executions and results say so), a stop reaches a run
waiting on a slow page by notification (no run reads its stop key while it waits), SIGTERM hands every
run back and a fresh worker finishes them from their checkpoints, and a killed process loses none."""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from redis import Redis
from rq import Worker
from rq.job import Job
from rq.registry import StartedJobRegistry

from jobs import RunStatus, RunStore
from tests.e2e.stack import CHANNEL, block_text, bot_replies, fleet, post_event, stack_environment
from tests.fakes.anthropic import FakeAnthropic, Reply, tool_reply
from tests.fakes.policies import MARKER, ResearchPolicy, side_reply, turn_of
from tests.fakes.slack import FakeSlack, app_mention_event, reaction_added_event
from tests.processes import wait_for

QUEUE = "deepthread"  # jobs.keys.QUEUE
RUNS = 3
GRACE_SECONDS = 30


class SlowPageAtTurnThree:
    """Each run searches, writes a section at turn 2 and reads `slow_url` at turn 3 (unless `quick`
    is set), then answers: decided from each request's own history, so a resumed run goes on."""

    def __init__(self, slow_url: str) -> None:
        self.slow_url = slow_url
        self.quick = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        side = side_reply(request)
        if side is not None:
            return side
        messages, turn = request["messages"], turn_of(request)
        if (request.get("tool_choice") or {}).get("type") == "none" or turn >= 5:
            return ResearchPolicy().final(messages)
        seen = MARKER.findall(json.dumps(messages))
        if turn == 2 and seen:
            return tool_reply(("write_section", {"title": "Fees", "body": f"The fee is low {seen[0]}."}))
        if turn == 3 and not self.quick.is_set():
            return tool_reply(("read_page", {"url": self.slow_url, "goal": "anything more"}))
        return tool_reply(("web_search", {"query": f"expense ratio angle {turn}"}))


def _environment(redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> dict[str, str]:
    return {**stack_environment(redis_url, fake_slack, fake_model, fake_web), "DEEPTHREAD_WORKER_RUNS": str(RUNS)}


def _ask(stack, fake_slack: FakeSlack, n: int, page: str) -> list[str]:
    """`n` mentions, each naming `page` (read_page opens only URLs the thread or results named)."""
    threads = []
    for i in range(n):
        envelope = app_mention_event(f"expense ratio of fund {i}, as on {page}", channel=CHANNEL)
        threads.append(fake_slack.seed_event(envelope))
        assert post_event(stack, envelope).status_code == 200
    return threads


def _all_ended(store: RunStore, run_ids: list[str]) -> bool:
    return all(store.get(run_id).status.finished for run_id in run_ids)


def test_one_worker_process_carries_several_runs_at_once_each_an_rq_job(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    fake_web.slow_seconds = 3  # every run waits on its slow page a while: long enough to see all three at once
    policy = SlowPageAtTurnThree(f"{fake_web.url}/slow")
    fake_model.policy = policy
    redis = Redis.from_url(redis_url)
    store = RunStore(redis)
    with fleet(tmp_path, _environment(redis_url, fake_slack, fake_model, fake_web), serves=1, workers=1) as running:
        [worker_process] = running.workers
        _ask(running.serves[0][1], fake_slack, RUNS, policy.slow_url)
        started = StartedJobRegistry(QUEUE, connection=redis)
        job_ids = wait_for(lambda: len(ids := started.get_job_ids()) == RUNS and ids, 60, "three runs started at once")
        [worker] = Worker.all(connection=redis)
        executions = worker.get_current_executions(refresh=True)
        assert sorted(e.job_id for e in executions) == sorted(job_ids), "one worker holds all three executions"
        assert worker.pid == worker_process.pid, "in the worker's own process, not a work-horse each"
        assert worker.get_state() == "busy"
        run_ids = wait_for(lambda: len(ids := store.active_ids()) == RUNS and ids, 10, "the three runs")
        wait_for(lambda: _all_ended(store, run_ids), 90, "all three runs to end")
        for job_id in job_ids:
            job = Job.fetch(job_id, connection=redis)
            wait_for(lambda job=job: job.get_status(refresh=True) == "finished", 20, f"RQ to record {job_id} as finished")
            assert job.return_value() == RunStatus.completed.value, "the job's result, as RQ records it"
        for run_id in run_ids:
            assert store.get(run_id).status == RunStatus.completed
        assert fake_web.slow_started == RUNS, "each run waited on its page"
        wait_for(lambda: Worker.all(connection=redis)[0].get_state() == "idle", 20, "the worker to be idle again")


def test_a_stop_reaches_a_waiting_run_by_notification_and_sigterm_hands_every_run_back(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    fake_web.slow_seconds = 120  # every run waits on its page far longer than the test
    policy = SlowPageAtTurnThree(f"{fake_web.url}/slow")
    fake_model.policy = policy
    redis = Redis.from_url(redis_url)
    store = RunStore(redis)
    env = _environment(redis_url, fake_slack, fake_model, fake_web)
    with fleet(tmp_path, env, serves=1, workers=1) as running:
        stack = running.serves[0][1]
        threads = _ask(stack, fake_slack, RUNS, policy.slow_url)
        wait_for(lambda: len(store.active_ids()) == RUNS, 30, "three runs")
        run_ids = store.active_ids()
        wait_for(lambda: fake_web.slow_started == RUNS, 60, "every run to wait on its slow page")

        # While they wait, no run reads its stop key (a poll would read it twice a second per run).
        stop_reads = _commands_touching(redis_url, ":stop", seconds=3.0)
        assert stop_reads == [], f"waiting runs polled for a stop: {stop_reads[:5]}"

        # A stop reaches one of them at once, though its page has ~two minutes to go.
        target = store.get(run_ids[0])
        report_ts = target.run.report_message
        assert report_ts
        policy.quick.set()  # its final answer (and everything after the hand-back) comes quickly
        reaction = reaction_added_event("octagonal_sign", user="U0ANA", item_channel=CHANNEL, item_ts=report_ts)
        assert post_event(stack, reaction).status_code == 200
        wait_for(lambda: store.get(target.run.id).status.finished, 20, "the stopped run to end")
        assert store.get(target.run.id).status == RunStatus.stopped
        assert fake_web.slow_served == 0, "stopped during its page, not after it"

        # SIGTERM: the two runs still waiting hand themselves back, and the process exits in time.
        [worker] = running.workers
        code, took = running.terminate(worker, grace=GRACE_SECONDS)
        assert code == 0 and took < GRACE_SECONDS, (code, took, running.log("worker", 1)[-3000:])
        log = running.log("worker", 1)
        assert "hand themselves back" in log and log.count("handed back at shutdown") == RUNS - 1, log[-3000:]
        # Each has a job of its own queued again (jobs.keys.current_job), in the queue itself: not taken
        # by the stopping worker's own BLMOVE, still blocked in Redis while its signal handler stopped the
        # scheduler, and dropped with the connection (the job sat in RQ's intermediate queue until RQ's
        # cleanup and a sweep, 77 s in bench.soak).
        queued = redis.lrange(f"rq:queue:{QUEUE}", 0, -1)
        for run_id in run_ids[1:]:
            job_id = redis.get(f"deepthread:run:{run_id}:job").decode()
            assert "-h" in job_id and Job.fetch(job_id, connection=redis).get_status() == "queued", job_id
            assert job_id.encode() in queued, (job_id, queued, redis.lrange(f"rq:queue:{QUEUE}:intermediate", 0, -1))

        # A fresh worker finishes both from their checkpoints: the section written before is kept.
        running.add_worker()
        wait_for(lambda: _all_ended(store, run_ids), 90, "the handed-back runs to finish")
        for run_id in run_ids[1:]:
            state = store.get(run_id)
            assert state.status == RunStatus.completed and any(s.title == "Fees" for s in state.sections), state.status
        assert all(len(bot_replies(fake_slack, t)) >= 2 for t in threads)
        assert "Stopped" in block_text(fake_slack.message(CHANNEL, target.run.progress_message))


def test_a_killed_worker_carrying_several_runs_loses_none_of_them(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    fake_web.slow_seconds = 120
    policy = SlowPageAtTurnThree(f"{fake_web.url}/slow")
    fake_model.policy = policy
    redis = Redis.from_url(redis_url)
    store = RunStore(redis)
    env = {**_environment(redis_url, fake_slack, fake_model, fake_web), "DEEPTHREAD_RUN_LOCK_SECONDS": "3"}
    with fleet(tmp_path, env, serves=1, workers=1) as running:
        _ask(running.serves[0][1], fake_slack, RUNS, policy.slow_url)
        wait_for(lambda: len(store.active_ids()) == RUNS, 30, "three runs")
        run_ids = store.active_ids()
        wait_for(lambda: fake_web.slow_started == RUNS, 60, "every run to wait on its slow page")
        [worker] = running.workers
        os.killpg(worker.pid, 9)  # the process and its extraction pool, at once, like a lost machine
        worker.wait()
        running.workers.remove(worker)
        policy.quick.set()
        running.add_worker()
        wait_for(lambda: _all_ended(store, run_ids), 120, "every run to be resumed and finish")
        for run_id in run_ids:
            state = store.get(run_id)
            assert state.status == RunStatus.completed and any(s.title == "Fees" for s in state.sections)
        assert "queued again to resume from its checkpoint" in running.logs_of("serve") + running.logs_of("worker")


def _commands_touching(redis_url: str, fragment: str, seconds: float) -> list[str]:
    """Every command Redis received for `seconds` that names `fragment` (MONITOR)."""
    seen: list[str] = []
    with Redis.from_url(redis_url).monitor() as monitor:
        deadline = time.monotonic() + seconds
        for command in monitor.listen():
            if fragment in command["command"]:
                seen.append(command["command"])
            if time.monotonic() > deadline:
                break
    return seen
