"""`deepthread doctor --live` asks the services themselves, one line per problem."""
from __future__ import annotations

import subprocess

import pytest
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
    """The problem lines (what Redis turned out to be, its keys, and where the model limits come
    from, are said first, problems or not)."""
    facts = ("Redis: ", "Redis keys: ", "Model limits")
    return [line for line in done.stdout.strip().splitlines() if not line.startswith(facts)]


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
        "from the Anthropic models overview",
        # Not a problem: what the capability table makes of an id it does not know.
        "note: model 'claude-nonexistent' is not in the capability table (agent/model_capabilities.py): using conservative "
        "defaults (no thinking, no server tools, 200k context, $5/$25 per MTok); add a row for it to use more"]


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


def test_the_live_check_says_where_the_model_limits_come_from(fake_slack, fake_model, fake_web, redis_url) -> None:
    fake_model.policy = lambda request: text_reply("p")
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url, DEEPTHREAD_MODEL_REQUESTS_PER_MINUTE="600")
    assert done.returncode == 0, done.stdout
    [line] = [line for line in done.stdout.splitlines() if line.startswith("Model limits")]
    assert "requests 600/min set" in line and "learned" in line, line


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


def test_through_sentinel_a_primary_that_takes_writes_without_a_replica_is_a_problem(
        tmp_path, fake_slack, fake_model, fake_web) -> None:
    from tests.processes import SentinelTopology

    fake_model.policy = lambda request: text_reply("p")
    topology = SentinelTopology(tmp_path / "redis", min_replicas_to_write=0).start()
    try:
        done = doctor_live(fake_slack, fake_model, fake_web, topology.url)
        assert done.returncode == 1, done.stdout
        assert problems(done) == [
            "the Redis primary takes writes that no replica has copied (min-replicas-to-write 0): in a failover's "
            "first seconds the old primary goes on taking writes, lost when it rejoins as a replica; set "
            "min-replicas-to-write 1 and min-replicas-max-lag 10 on every Redis data server (docs/operating.md)"]
    finally:
        topology.stop()


def _cloud_env(provider: str, fake_model: FakeAnthropic, **overrides: str) -> dict[str, str]:
    from tests.fakes import clouds

    if provider == "bedrock":
        env = dict(DEEPTHREAD_MODEL_PROVIDER="bedrock", AWS_REGION="eu-west-1", AWS_ACCESS_KEY_ID=clouds.AWS_ACCESS_KEY,
                   AWS_SECRET_ACCESS_KEY=clouds.AWS_SECRET_KEY, ANTHROPIC_BEDROCK_BASE_URL=fake_model.url,
                   DEEPTHREAD_MODEL="us.anthropic.claude-sonnet-5-5-v1:0",
                   DEEPTHREAD_SMALL_MODEL="anthropic.claude-haiku-5-5-v1:0")
    else:
        env = dict(DEEPTHREAD_MODEL_PROVIDER="vertex", CLOUD_ML_REGION="us-east5",
                   ANTHROPIC_VERTEX_PROJECT_ID=clouds.VERTEX_PROJECT, DEEPTHREAD_VERTEX_ACCESS_TOKEN=clouds.VERTEX_TOKEN,
                   ANTHROPIC_VERTEX_BASE_URL=f"{fake_model.url}/v1", DEEPTHREAD_MODEL="claude-sonnet-5-5@20261001",
                   DEEPTHREAD_SMALL_MODEL="claude-haiku-5-5@20261001")
    return {**env, **overrides}


@pytest.mark.parametrize("provider", ["bedrock", "vertex"])
def test_the_live_check_pings_both_models_through_the_configured_cloud(provider, fake_slack, fake_model, fake_web,
                                                                       redis_url) -> None:
    fake_model.policy = lambda request: text_reply("p")
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url, **_cloud_env(provider, fake_model))
    assert done.returncode == 0, done.stdout + done.stderr
    label = "AWS Bedrock" if provider == "bedrock" else "Google Vertex AI"
    assert f"on {label}." in done.stdout
    # Both pings went through the cloud's own route, none to the Anthropic API.
    assert [c for c, *_ in fake_model.cloud_requests] == [provider, provider]
    assert len(fake_model.requests) == 2


@pytest.mark.parametrize(("provider", "wrong", "says"), [
    ("bedrock", {"AWS_SECRET_ACCESS_KEY": "not-the-secret"}, "AWS Bedrock refused the AWS credentials"),
    ("vertex", {"DEEPTHREAD_VERTEX_ACCESS_TOKEN": "ya29.expired"}, "Google Vertex AI refused the credentials"),
])
def test_refused_cloud_credentials_get_one_line_saying_what_to_fix(provider, wrong, says, fake_slack, fake_model,
                                                                   fake_web, redis_url) -> None:
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url, **_cloud_env(provider, fake_model, **wrong))
    lines = problems(done)  # the Redis line (what Redis was found) is information, not a problem
    assert done.returncode == 1 and lines == [next(line for line in lines if line.startswith(says))], lines
    assert fake_model.requests == []


@pytest.mark.parametrize(("env", "says"), [
    ({"DEEPTHREAD_MODEL_PROVIDER": "bedrock"}, "AWS_REGION is not set: DEEPTHREAD_MODEL_PROVIDER=bedrock needs the region"),
    ({"DEEPTHREAD_MODEL_PROVIDER": "bedrock", "AWS_REGION": "us-east-1"},
     "DEEPTHREAD_MODEL is not set: DEEPTHREAD_MODEL_PROVIDER=bedrock needs the model id in Bedrock's form"),
    ({"DEEPTHREAD_MODEL_PROVIDER": "vertex", "CLOUD_ML_REGION": "us-east5", "DEEPTHREAD_VERTEX_ACCESS_TOKEN": "t"},
     "ANTHROPIC_VERTEX_PROJECT_ID is not set: DEEPTHREAD_MODEL_PROVIDER=vertex needs the Google Cloud project"),
    ({"DEEPTHREAD_MODEL_PROVIDER": "azure"}, "DEEPTHREAD_MODEL_PROVIDER"),
    ({"DEEPTHREAD_THINKING": "sometimes"}, "DEEPTHREAD_THINKING: Input should be 'on' or 'off'"),
])
def test_a_cloud_missing_a_setting_is_named_before_anything_is_asked(env, says, fake_slack, fake_model, fake_web,
                                                                     redis_url) -> None:
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url, **env)
    assert done.returncode != 0 and says in done.stdout + done.stderr, done.stdout + done.stderr
    assert fake_model.requests == [] and fake_model.cloud_requests == []


def test_the_live_check_searches_through_anthropics_own_web_search(fake_slack, fake_model, fake_web,
                                                                   redis_url) -> None:
    fake_model.policy = lambda request: text_reply("p")
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url, DEEPTHREAD_SEARCH="anthropic")
    assert done.returncode == 0, done.stdout + done.stderr
    assert fake_model.searches == ["index fund expense ratio"]


def test_anthropic_search_on_bedrock_is_refused_by_the_static_check(fake_slack, fake_model, fake_web,
                                                                    redis_url) -> None:
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url, DEEPTHREAD_SEARCH="anthropic",
                       **_cloud_env("bedrock", fake_model))
    assert done.returncode == 1
    assert "cannot run Anthropic's web search on AWS Bedrock" in done.stdout, done.stdout
