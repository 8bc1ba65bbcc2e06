"""`deepthread doctor --live` asks the services themselves, one line per problem."""
from __future__ import annotations

import subprocess
from typing import Any

from tests.fakes.anthropic import FakeAnthropic, FakeAPIError, text_reply
from tests.fakes.slack import FakeSlack
from tests.processes import DEEPTHREAD, ROOT, environment


def doctor_live(fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web: Any, redis_url: str,
                **env: str) -> subprocess.CompletedProcess[str]:
    settings = dict(SLACK_BOT_TOKEN="xoxb-1", SLACK_SIGNING_SECRET="s", SLACK_API_URL=f"{fake_slack.url}/api/",
                    ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=fake_model.url, REDIS_URL=redis_url,
                    DEEPTHREAD_SEARCH="searxng", SEARXNG_URL=fake_web.url)
    return subprocess.run(DEEPTHREAD + ["doctor", "--live"], env=environment(**{**settings, **env}), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def problems(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The problem lines (what Redis turned out to be is said first, problems or not)."""
    return [line for line in done.stdout.strip().splitlines() if not line.startswith("Redis: ")]


def test_a_working_setup_passes_the_live_check(fake_slack, fake_model, fake_web, redis_url) -> None:
    fake_model.policy = lambda request: text_reply("p")
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Configuration checked live" in done.stdout
    assert {r["model"] for r in fake_model.requests} == {"claude-sonnet-5-5", "claude-haiku-5-5"}
    assert [m for m, _ in fake_slack.calls if m == "auth.test"] == ["auth.test"]


def test_a_token_missing_a_scope_is_named_with_what_needs_it(fake_slack, fake_model, fake_web, redis_url) -> None:
    fake_model.policy = lambda request: text_reply("p")
    fake_slack.scopes -= {"users:read", "pins:write"}
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url)
    assert done.returncode == 1
    lines = done.stdout.strip().splitlines()
    assert any("lacks the scope pins:write" in line and "pins.add" in line for line in lines), lines
    assert any("lacks the scope users:read" in line and "users.info" in line for line in lines), lines
    assert sum("lacks the scope" in line for line in lines) == 2


def test_an_unknown_model_name_is_reported_by_its_variable(fake_slack, fake_model, fake_web, redis_url) -> None:
    def policy(request: dict[str, Any]) -> Any:
        if request["model"] == "claude-nonexistent":
            raise FakeAPIError(404, "model: claude-nonexistent", "not_found_error")
        return text_reply("p")

    fake_model.policy = policy
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url, DEEPTHREAD_SMALL_MODEL="claude-nonexistent")
    assert done.returncode == 1
    assert problems(done) == [
        "DEEPTHREAD_SMALL_MODEL=claude-nonexistent is not a model this key can use: set it to a current model name "
        "from the Anthropic models overview"]


def test_a_refused_slack_token_and_a_blocked_search_get_a_line_each(fake_slack, fake_model, fake_web,
                                                                    redis_url) -> None:
    fake_model.policy = lambda request: text_reply("p")
    fake_slack.fail_next("auth.test", error="invalid_auth")
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url, SEARXNG_URL="http://127.0.0.1:1")
    lines = problems(done)
    assert done.returncode == 1 and len(lines) == 2, lines
    assert lines[0].startswith("Slack refused SLACK_BOT_TOKEN (invalid_auth)")
    assert lines[1].startswith("DEEPTHREAD_SEARCH=searxng: ") and "Traceback" not in done.stderr


# --- Redis: the topology found, the primary, the eviction policy ---------------------------------


def test_the_live_check_says_what_redis_it_found(fake_slack, fake_model, fake_web, redis_url) -> None:
    fake_model.policy = lambda request: text_reply("p")
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url)
    assert done.returncode == 0, done.stdout
    [line] = [line for line in done.stdout.splitlines() if line.startswith("Redis: ")]
    assert line == (f"Redis: one Redis at {redis_url}, role master, 0 replica(s), maxmemory-policy noeviction")


def test_a_redis_that_evicts_keys_is_a_problem_with_what_to_set(fake_slack, fake_model, fake_web, redis_aof) -> None:
    from redis import Redis

    fake_model.policy = lambda request: text_reply("p")
    Redis.from_url(redis_aof.url).config_set("maxmemory-policy", "allkeys-lru")
    done = doctor_live(fake_slack, fake_model, fake_web, redis_aof.url)
    assert done.returncode == 1
    assert problems(done) == [
        "Redis evicts keys under memory pressure (maxmemory-policy allkeys-lru): run leases, stop marks and Slack's "
        "event dedupe would vanish with them; set maxmemory-policy noeviction (and enough maxmemory)"]


def test_through_sentinel_the_live_check_names_the_primary_and_refuses_a_replica(
        tmp_path, fake_slack, fake_model, fake_web) -> None:
    from tests.processes import SentinelTopology

    fake_model.policy = lambda request: text_reply("p")
    topology = SentinelTopology(tmp_path / "redis").start()
    try:
        done = doctor_live(fake_slack, fake_model, fake_web, topology.url)
        assert done.returncode == 0, done.stdout
        [line] = [line for line in done.stdout.splitlines() if line.startswith("Redis: ")]
        host, port = topology.primary()
        assert line.startswith("Redis: Sentinel service 'mymaster' (db 0) through 3 sentinels (127.0.0.1:")
        assert f"primary {host}:{port}, role master, 1 replica(s), maxmemory-policy noeviction" in line
        replica = doctor_live(fake_slack, fake_model, fake_web, f"redis://127.0.0.1:{topology.replica_port}/0")
        assert replica.returncode == 1
        assert any("reaches a slave, which refuses writes: point it at the primary, or at the sentinels" in p
                   for p in problems(replica))
    finally:
        topology.stop()
