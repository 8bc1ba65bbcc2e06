"""What operators see of a real run: the Prometheus endpoints of serve and the worker, scraped
while the run is going and after it, and JSON log lines that name the run and workspace and
never a secret. Real serve and worker processes, real Redis, the fakes."""
from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from redis import Redis

from jobs import RunStore
from jobs.upkeep.gauges import GAUGES_CACHE_SECONDS
from tests.e2e.stack import CHANNEL, assert_cited_report_pinned, post_event, stack_environment
from tests.fakes.slack import TEAM_ID, FakeSlack, app_mention_event
from tests.processes import SIGNING_SECRET, Stack, free_port, running, wait_for, wait_listening

# Distinctive secrets: if any reaches a log line, the test finds it.
BOT_TOKEN = "xoxb-operators-secret-bot-token-4711"
MODEL_KEY = "sk-ant-operators-secret-model-key-0815"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    answer = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    assert answer.status_code == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code in (200, 503)
    except httpx.HTTPError:
        return False


def total(samples: Samples, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(value for (n, have), value in samples.items() if n == name and wanted <= have)


def test_metrics_are_scraped_during_a_run_and_logs_are_json_lines_without_secrets(
    tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web
) -> None:
    # Every answer streams for a while: the run is still going across several gauge cache periods.
    fake_model.stream_delay = 0.2
    env = stack_environment(redis_url, fake_slack, fake_model, fake_web)
    env.update(SLACK_BOT_TOKEN=BOT_TOKEN, ANTHROPIC_API_KEY=MODEL_KEY, DEEPTHREAD_LOG_FORMAT="json")
    port, serve_metrics, worker_metrics = free_port(), free_port(), free_port()
    serve_env = {**env, "PORT": str(port), "DEEPTHREAD_METRICS_PORT": str(serve_metrics)}
    worker_env = {**env, "DEEPTHREAD_METRICS_PORT": str(worker_metrics)}
    with running(["serve"], serve_env, tmp_path / "serve.log") as serve, \
            running(["worker"], worker_env, tmp_path / "worker.log"):
        base = wait_listening(port, serve, tmp_path / "serve.log")
        stack = Stack(events_url=f"{base}/slack/events", env=serve_env, logs=tmp_path)
        envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=CHANNEL)
        mention_ts = fake_slack.seed_event(envelope)
        assert post_event(stack, envelope, secret=SIGNING_SECRET).status_code == 200

        # During the run: the worker's endpoint shows it running in its workspace, and the model
        # requests its forked work-horse has made so far.
        def running_with_requests() -> Samples | None:
            try:
                samples = scrape(worker_metrics)
            except httpx.HTTPError:
                return None
            busy = total(samples, "deepthread_runs_active", team=TEAM_ID) == 1
            asked = total(samples, "deepthread_model_requests_total", kind="turn", outcome="ok") >= 1
            return samples if busy and asked else None

        during = wait_for(running_with_requests, 30, "the worker's metrics to show the run and its requests")
        assert total(during, "deepthread_model_request_seconds_count") >= 1

        assert_cited_report_pinned(fake_slack, mention_ts, fake_web.url, timeout=60)
        run_id = RunStore(Redis.from_url(redis_url)).thread_run_ids(TEAM_ID, CHANNEL, mention_ts)[0]

        # The run gauges are read at most once per GAUGES_CACHE_SECONDS: wait out one period.
        after = wait_for(lambda: (s := scrape(worker_metrics)) and total(s, "deepthread_runs_active") == 0 and s,
                         GAUGES_CACHE_SECONDS * 3, "the gauge to show the run ended")
        for kind in ("input", "output"):
            assert total(after, "deepthread_model_tokens_total", type=kind) > 0, kind
        assert total(after, "deepthread_model_cost_usd_total") > 0
        assert total(after, "deepthread_model_capacity_wait_seconds_count", team=TEAM_ID) >= 1
        assert total(after, "deepthread_sweeps_total", outcome="done") >= 1

        shown = wait_for(lambda: (s := scrape(serve_metrics)) and
                         total(s, "deepthread_publisher_lag_seconds_count") >= 1 and s, 10, "publisher lag")
        assert total(shown, "deepthread_slack_calls_total", method="chat.postMessage") >= 2
        assert total(shown, "deepthread_slack_calls_total", method="chat.update") >= 1
        # serve's loop (every workspace's events and the publisher) reports its lag, as a worker's does.
        assert total(shown, "deepthread_event_loop_lag_seconds_count") >= 10

    for name in ("serve.log", "worker.log"):
        text = (tmp_path / name).read_text()
        assert BOT_TOKEN not in text and MODEL_KEY not in text, f"a secret reached {name}"
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        assert lines, name
        assert all({"time", "level", "logger", "message", "run_id", "team"} <= set(line) for line in lines), name
    worker_lines = [json.loads(line) for line in (tmp_path / "worker.log").read_text().splitlines() if line.strip()]
    about_the_run = [line for line in worker_lines if line["run_id"] == run_id]
    assert about_the_run and all(line["team"] == TEAM_ID for line in about_the_run), worker_lines[-5:]


def test_a_metrics_port_already_taken_stops_the_worker_with_one_line_that_says_what_to_do(
    tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web
) -> None:
    import socket

    taken = socket.socket()
    taken.bind(("0.0.0.0", 0))
    taken.listen()
    port = taken.getsockname()[1]
    env = {**stack_environment(redis_url, fake_slack, fake_model, fake_web), "DEEPTHREAD_METRICS_PORT": str(port)}
    try:
        with running(["worker"], env, tmp_path / "worker.log") as worker:
            assert worker.wait(120) == 2
    finally:
        taken.close()
    log = (tmp_path / "worker.log").read_text()
    assert f"DEEPTHREAD_METRICS_PORT {port} cannot be served" in log and "a port of its own" in log
    assert "Traceback" not in log


def test_a_run_waiting_for_model_capacity_says_so_in_its_progress_and_the_gauge_counts_it(
    tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web
) -> None:
    from tests.e2e.stack import block_text, bot_replies

    env = stack_environment(redis_url, fake_slack, fake_model, fake_web)
    # The organization's limit, set by the operator: two requests a minute, so the third waits ~30 s.
    env["DEEPTHREAD_MODEL_REQUESTS_PER_MINUTE"] = "2"
    port, worker_metrics = free_port(), free_port()
    with running(["serve"], {**env, "PORT": str(port)}, tmp_path / "serve.log") as serve, \
            running(["worker"], {**env, "DEEPTHREAD_METRICS_PORT": str(worker_metrics)}, tmp_path / "worker.log"):
        base = wait_listening(port, serve, tmp_path / "serve.log")
        stack = Stack(events_url=f"{base}/slack/events", env=env, logs=tmp_path)
        envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=CHANNEL)
        mention_ts = fake_slack.seed_event(envelope)
        assert post_event(stack, envelope).status_code == 200
        progress = wait_for(lambda: bot_replies(fake_slack, mention_ts)[:1], 60, "the progress message")[0]
        wait_for(lambda: "Waiting for model capacity" in block_text(fake_slack.message(CHANNEL, progress.ts)), 90,
                 "the progress message to say the run waits for model capacity")

        def counted() -> bool:
            try:
                return total(scrape(worker_metrics), "deepthread_runs_waiting_for_capacity", team=TEAM_ID) == 1
            except httpx.HTTPError:
                return False

        wait_for(counted, 30, "the gauge to count the waiting run")
    assert not fake_model.served_failures, "the limiter kept the run under the limit: no 429 was needed"


def outside_address() -> str:
    """This host's address on its network (not loopback): where another machine would connect."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))  # UDP: no packet is sent, this only picks the outgoing interface
        return probe.getsockname()[0]


def test_metrics_and_worker_health_answer_on_loopback_only_unless_opened(
    tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web
) -> None:
    import socket

    outside = outside_address()
    assert not outside.startswith("127."), "this host needs a non-loopback address for the test"
    metrics, health = free_port(), free_port()
    env = {**stack_environment(redis_url, fake_slack, fake_model, fake_web),
           "DEEPTHREAD_METRICS_PORT": str(metrics), "DEEPTHREAD_HEALTH_PORT": str(health)}
    with running(["worker"], env, tmp_path / "worker.log"):
        wait_for(lambda: _answers(f"http://127.0.0.1:{health}/healthz") and _answers(
            f"http://127.0.0.1:{metrics}/metrics"), 60, "the worker's endpoints on loopback")
        for port in (metrics, health):
            with socket.socket() as attempt, pytest.raises(ConnectionRefusedError):
                attempt.settimeout(5)
                attempt.connect((outside, port))
