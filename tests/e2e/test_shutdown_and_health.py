"""Graceful and observable processes, with real serve and worker processes: SIGTERM lets an event's
posts under way finish and serve exits well within a platform's 30 s grace; serve (HTTP and Socket
Mode) and workers answer /healthz and /readyz from real checks (Redis, Slack, the publisher, the run
a worker carries and its lease)."""
from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import httpx
from redis import Redis

from jobs import RunStore
from tests.e2e.stack import (
    CHANNEL,
    bot_replies,
    fleet,
    post_event,
    serve_only,
    socket_mode_stack,
    stack_environment,
)
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import SteadyRunsPolicy
from tests.fakes.slack import FakeSlack, app_mention_event
from tests.processes import RedisWithAOF, free_port, wait_for
from tests.fakes.slack_records import TEAM_ID

GRACE_SECONDS = 30  # what platforms give a process between SIGTERM and SIGKILL


def health(base: str, path: str) -> tuple[int, dict]:
    answer = httpx.get(f"{base}{path}", timeout=5)
    return answer.status_code, answer.json()


def test_sigterm_lets_a_mention_under_way_post_its_messages_then_exits_in_time(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.policy = SteadyRunsPolicy(turns=4)
    # Each post answers slowly, so the mention's handler is mid-post when the signal comes.
    fake_slack.answer_late("chat.postMessage", times=2, delay=3.0)
    with serve_only(stack_environment(redis_url, fake_slack, fake_model, fake_web), tmp_path / "serve.log") as (
            serve, stack):
        envelope = app_mention_event("expense ratio VTI", channel=CHANNEL)
        thread = fake_slack.seed_event(envelope)
        assert post_event(stack, envelope).status_code == 200
        wait_for(lambda: fake_slack.calls_of("chat.postMessage"), 20, "the first post to be under way")
        signalled = time.monotonic()
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(GRACE_SECONDS) == 0, "exited on its own, cleanly"
        took = time.monotonic() - signalled
    assert took < GRACE_SECONDS
    assert len(bot_replies(fake_slack, thread)) == 2, "both posts were let finish, not cut off mid-way"
    run = RunStore(Redis.from_url(redis_url)).get(RunStore(Redis.from_url(redis_url)).thread_run_ids(TEAM_ID, CHANNEL, thread)[0])
    assert run.run.progress_message and run.run.report_message, "and attached to the run before exiting"
    assert re.search(r"waiting for \d+ event handler\(s\) to finish", (tmp_path / "serve.log").read_text())


def test_serve_readiness_follows_redis_while_liveness_stays(tmp_path: Path, redis_aof: RedisWithAOF,
                                                            fake_slack: FakeSlack, fake_model, fake_web) -> None:
    with serve_only(stack_environment(redis_aof.url, fake_slack, fake_model, fake_web), tmp_path / "serve.log") as (
            _, stack):
        base = stack.events_url.removesuffix("/slack/events")
        status, body = health(base, "/readyz")
        assert status == 200 and body["checks"]["redis"] == "answers" and body["checks"]["slack"] == "connected"
        assert body["checks"]["publisher"].startswith("last cycle")
        redis_aof.stop()
        status, body = wait_for(lambda: (answer := health(base, "/readyz"))[0] == 503 and answer, 20,
                                "readiness to notice Redis is gone")
        assert body["checks"]["redis"].startswith("not answering")
        assert health(base, "/healthz")[0] == 200, "alive all the same: restarting it would not bring Redis back"
        redis_aof.start()
        wait_for(lambda: health(base, "/readyz")[0] == 200, 30, "ready again once Redis is back")


def test_socket_mode_serve_answers_health_checks_on_its_port(tmp_path: Path, redis_url: str, fake_slack: FakeSlack,
                                                             fake_model, fake_web) -> None:
    with socket_mode_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url,
                           web_url=fake_web.url) as stack:
        base = f"http://127.0.0.1:{stack.env['PORT']}"
        assert health(base, "/healthz")[0] == 200
        status, body = wait_for(lambda: (answer := health(base, "/readyz"))[0] == 200 and answer, 20,
                                "Socket Mode serve to be ready")
        assert body["checks"]["slack"] == "connected" and body["checks"]["redis"] == "answers"


def test_a_worker_reports_the_run_it_carries_and_whether_it_holds_its_lease(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.delay = 0.3
    fake_model.policy = SteadyRunsPolicy(turns=40)
    port = free_port()
    env = {**stack_environment(redis_url, fake_slack, fake_model, fake_web), "DEEPTHREAD_HEALTH_PORT": str(port)}
    with fleet(tmp_path, env, serves=1, workers=1) as running:
        base = f"http://127.0.0.1:{port}"
        status, body = wait_for(lambda: _answers(base, "/readyz"), 60, "the worker's health endpoint")
        assert status == 200 and body["checks"]["job"] == "idle"
        assert health(base, "/healthz")[0] == 200
        stack = running.serves[0][1]
        envelope = app_mention_event("expense ratio VTI", channel=CHANNEL)
        fake_slack.seed_event(envelope)
        assert post_event(stack, envelope).status_code == 200
        _, body = wait_for(lambda: (a := health(base, "/readyz"))[1]["checks"].get("lease") == "held" and a, 30,
                           "the worker to carry the run")
        [run_id] = RunStore(Redis.from_url(redis_url)).active_ids()
        assert body["checks"]["run"] == run_id and body["checks"]["job"].startswith("run-")


def _answers(base: str, path: str) -> tuple[int, dict] | None:
    try:
        return health(base, path)
    except httpx.HTTPError:
        return None
