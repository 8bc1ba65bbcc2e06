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
    assert done.stdout.strip().splitlines() == [
        "DEEPTHREAD_SMALL_MODEL=claude-nonexistent is not a model this key can use: set it to a current model name "
        "from the Anthropic models overview"]


def test_a_refused_slack_token_and_a_blocked_search_get_a_line_each(fake_slack, fake_model, fake_web,
                                                                    redis_url) -> None:
    fake_model.policy = lambda request: text_reply("p")
    fake_slack.fail_next("auth.test", error="invalid_auth")
    done = doctor_live(fake_slack, fake_model, fake_web, redis_url, SEARXNG_URL="http://127.0.0.1:1")
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 2, lines
    assert lines[0].startswith("Slack refused SLACK_BOT_TOKEN (invalid_auth)")
    assert lines[1].startswith("DEEPTHREAD_SEARCH=searxng: ") and "Traceback" not in done.stderr
