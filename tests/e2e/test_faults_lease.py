"""Fault: Redis stalls (SIGSTOP: connections held, nothing answered, its clock running) for longer
than a run's lease while the job is mid-turn. Real serve and two worker processes, a real
redis-server the test pauses and resumes.

The job cannot renew its lease, so it gives up the run on its own and stops; when Redis answers
again the lease has lapsed, a sweep queues the run again and a new job (with the next epoch)
continues from the checkpoint. Nothing the old job tried to write lands: its stalled writes carry
its fence and are refused."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from redis import Redis
from rq.job import Job

from jobs import RunStatus, RunStore, keys
from tests.e2e.stack import assert_cited_report_pinned, fleet, report_text, stack_environment, start
from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply, tool_reply
from tests.fakes.policies import MARKER, ResearchPolicy, extract, is_extraction, is_summary_request, summary_reply
from tests.fakes.slack import FakeSlack
from tests.processes import RedisWithAOF, wait_for
from tests.fakes.slack_records import TEAM_ID

LEASE_SECONDS = 4  # short, so the test's pause outlasts it; production's outlasts the retry window
PAUSE_SECONDS = 10.0
STALE = "Written during the pause"


class PausedMidRun:
    """search → write "Fees" → search → [Redis stalls as this turn is answered] write a section
    (the old job never gets it stored) → search → write "Tracking" → answer. Turns are counted
    across both jobs, so the new job, resuming after turn 3, goes on with turn 5."""

    def __init__(self, at_turn_4: Callable[[], None]) -> None:
        self.at_turn_4 = at_turn_4
        self.turn = 0
        self.history_at_turn: dict[int, int] = {}

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        if is_summary_request(request):
            return summary_reply(request)
        if not request.get("tools"):
            return text_reply('{"constraints": []}')
        if (request.get("tool_choice") or {}).get("type") == "none":
            return ResearchPolicy().final(request["messages"])
        self.turn += 1
        self.history_at_turn[self.turn] = len(request["messages"])
        seen = list(dict.fromkeys(MARKER.findall(json.dumps(request["messages"]))))
        if self.turn in (1, 3, 5):
            return tool_reply(("web_search", {"query": f"expense ratio VTI angle {self.turn}"}))
        if self.turn == 2:
            return tool_reply(("write_section", {"title": "Fees", "body": f"VTI charges the lowest fee {seen[0]}."}))
        if self.turn == 4:
            self.at_turn_4()
            return tool_reply(("write_section", {"title": STALE, "body": f"This never lands {seen[0]}."}))
        if self.turn == 6:
            return tool_reply(("write_section", {"title": "Tracking", "body": f"Tracking differs by fund {seen[-1]}."}))
        return ResearchPolicy().final(request["messages"])


def stall(redis: RedisWithAOF, seconds: float, paused: list[float]) -> None:
    """Pause Redis now (noting when), resume it `seconds` later, from a thread of its own."""
    redis.pause()
    paused.append(time.time())

    def later() -> None:
        time.sleep(seconds)
        redis.resume()

    threading.Thread(target=later, name="redis-stall", daemon=True).start()


def test_a_job_that_loses_its_lease_during_a_redis_stall_stops_and_a_new_one_continues_from_the_checkpoint(
        tmp_path: Path, redis_aof: RedisWithAOF, fake_slack: FakeSlack, fake_model: FakeAnthropic,
        fake_web) -> None:
    paused: list[float] = []
    policy = PausedMidRun(lambda: stall(redis_aof, PAUSE_SECONDS, paused))
    fake_model.policy = policy
    env = {**stack_environment(redis_aof.url, fake_slack, fake_model, fake_web),
           "DEEPTHREAD_RUN_LOCK_SECONDS": str(LEASE_SECONDS)}
    with fleet(tmp_path, env, serves=1, workers=2) as running:
        stack = running.serves[0][1]
        thread, progress_ts, report_ts = start(stack, fake_slack)
        redis = Redis.from_url(redis_aof.url)
        run_id = RunStore(redis).thread_run_ids(TEAM_ID, "C0TEST", thread)[0]
        first_job = wait_for(lambda: redis.get(keys.current_job(run_id)), 20, "the run's job").decode()
        wait_for(lambda: paused, 40, "Redis to stall mid-turn")

        progress, report = assert_cited_report_pinned(fake_slack, thread, fake_web.url, timeout=120)
        assert (progress.ts, report.ts) == (progress_ts, report_ts), "one progress message and one report"
        text = report_text(fake_slack, report_ts)
        assert "Fees" in text and "Tracking" in text and STALE not in text

        state = RunStore(redis).get(run_id)
        assert state.status == RunStatus.completed
        assert [s.title for s in state.sections] == ["Fees", "Tracking"], "the old job's last section never landed"
        assert Job.fetch(first_job, connection=redis).return_value() == "lost", "the old job stopped, saying why"
        assert "lost its lease" in running.logs_of("worker")

        # The new job continued from the checkpoint: its first request carries turns 1-3, not a fresh start.
        assert policy.history_at_turn[5] >= policy.history_at_turn[4] - 2 > 1
        # Every write after the stall began is the new job's: epochs in the run's update stream only rise
        # past it, and none of epoch 1 comes after the stall.
        pause_ms = int(paused[0] * 1000)
        after = [(int(entry_id.split(b"-")[0]), fields.get(b"epoch"))
                 for entry_id, fields in redis.xrange(keys.UPDATES_STREAM)
                 if fields[b"run_id"].decode() == run_id]
        late_epochs = {epoch for at, epoch in after if at > pause_ms and epoch is not None}
        assert late_epochs and b"1" not in late_epochs, f"no write of the old job after the stall: {late_epochs}"
