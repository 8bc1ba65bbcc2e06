"""The `deepthread` command: doctor's one-line problems, start-up errors, and `up` end to end."""
from __future__ import annotations

import subprocess
from pathlib import Path

from tests.e2e.stack import Stack, block_text, bot_replies, post_event
from tests.fakes.server import free_port
from tests.fakes.slack import FakeSlack, app_mention_event
from tests.processes import DEEPTHREAD, ROOT, SIGNING_SECRET, environment, running, wait_for, wait_listening


def deepthread(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(DEEPTHREAD + list(args), env=environment(**env), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_doctor_names_each_missing_setting_on_its_own_line() -> None:
    done = deepthread("doctor", DEEPTHREAD_SEARCH="searxng", REDIS_URL="redis://127.0.0.1:1/0")
    assert done.returncode == 1
    lines = done.stdout.strip().splitlines()
    assert [line.split(" ")[0].split("=")[0] for line in lines] == [
        "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "ANTHROPIC_API_KEY", "DEEPTHREAD_SEARCH", "REDIS_URL"]
    assert "SEARXNG_URL" in lines[3] and "not reachable" in lines[4]


def test_doctor_passes_a_complete_configuration(redis_url: str) -> None:
    done = deepthread("doctor", SLACK_BOT_TOKEN="xoxb-1", SLACK_SIGNING_SECRET="s", ANTHROPIC_API_KEY="k",
                      REDIS_URL=redis_url)
    assert done.returncode == 0, done.stdout
    assert "Configuration looks complete" in done.stdout


def test_invalid_values_are_reported_not_tracebacks() -> None:
    done = deepthread("doctor", PORT="eighty")
    assert done.returncode == 2 and "PORT" in done.stderr and "Traceback" not in done.stderr
    done = deepthread("doctor", SLACK_BOT_TOKEN="xoxp-user-token", SLACK_APP_TOKEN="bad", ANTHROPIC_API_KEY="k",
                      DEEPTHREAD_SEARCH="bing")
    assert "should start with xoxb-" in done.stdout and "xapp-" in done.stdout and "bing is not a known provider" in done.stdout


def test_serve_with_a_rejected_token_says_so_in_one_line(fake_slack: FakeSlack, redis_url: str) -> None:
    fake_slack.fail_next("auth.test", error="invalid_auth")
    done = deepthread("serve", SLACK_BOT_TOKEN="xoxb-revoked", SLACK_SIGNING_SECRET="s",
                      SLACK_API_URL=f"{fake_slack.url}/api/", REDIS_URL=redis_url, PORT=str(free_port()))
    assert done.returncode == 2
    assert "Slack rejected SLACK_BOT_TOKEN (invalid_auth)" in done.stderr
    assert "xoxb-revoked" not in done.stderr, "tokens never reach the log"


def test_ask_without_a_question_or_key_explains_what_to_do() -> None:
    assert "Give a question" in deepthread("ask", " ").stderr
    done = deepthread("ask", "what is VTI?")
    assert done.returncode == 2 and "ANTHROPIC_API_KEY is not set" in done.stderr


def test_up_starts_its_own_redis_and_worker(tmp_path: Path, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    port = free_port()
    env = environment(
        SLACK_BOT_TOKEN="xoxb-test", SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=f"{fake_slack.url}/api/",
        ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=fake_model.url, DEEPTHREAD_SEARCH="searxng",
        SEARXNG_URL=fake_web.url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1", PORT=str(port),
        # Its own data directory: the default one belongs to whoever runs `deepthread up` on this machine.
        DEEPTHREAD_DATA_DIR=str(tmp_path / "data"),
    )  # no REDIS_URL: the embedded default
    with running(["up"], env, tmp_path / "up.log") as process:
        base = wait_listening(port, process, tmp_path / "up.log", command="up")
        stack = Stack(events_url=f"{base}/slack/events", env=env, logs=tmp_path)
        envelope = app_mention_event("expense ratio VTI SCHB ITOT")
        ts = fake_slack.seed_event(envelope)
        assert post_event(stack, envelope).status_code == 200
        replies = wait_for(lambda: len(bot_replies(fake_slack, ts)) >= 2 and bot_replies(fake_slack, ts), 10, "replies")
        wait_for(lambda: "Final" in block_text(fake_slack.message("C0TEST", replies[1].ts)), 30, "the final report")
    log = (tmp_path / "up.log").read_text()
    assert "Started a local redis-server" in log
