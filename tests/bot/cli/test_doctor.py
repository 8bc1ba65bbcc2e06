"""doctor in multi-workspace mode: each missing or wrong OAuth setting is one line saying what to
set; single-token mode is unchanged and needs none of them."""
from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from bot.cli.doctor import check
from bot.settings import Settings

KEY = Fernet.generate_key().decode()
COMPLETE = {"SLACK_CLIENT_ID": "111.222", "SLACK_CLIENT_SECRET": "secret", "SLACK_STATE_SECRET": "state",
            "DEEPTHREAD_TOKEN_KEY": KEY, "SLACK_SIGNING_SECRET": "signing", "ANTHROPIC_API_KEY": "k"}


def slack_lines(command: str = "serve", **values: str) -> list[str]:
    settings = Settings(**values)  # type: ignore[arg-type]  # by alias, as the environment names them
    return [line for line in check(settings, command) if not line.startswith("REDIS_URL")]


def test_a_complete_multi_workspace_configuration_needs_no_bot_token() -> None:
    assert slack_lines(**COMPLETE) == []
    assert Settings(**COMPLETE).multi_workspace  # type: ignore[arg-type]


@pytest.mark.parametrize(("missing", "says"), [
    ("SLACK_CLIENT_ID", "SLACK_CLIENT_ID is not set but SLACK_CLIENT_SECRET is"),
    ("SLACK_CLIENT_SECRET", "SLACK_CLIENT_SECRET is not set but SLACK_CLIENT_ID is"),
    ("SLACK_STATE_SECRET", "SLACK_STATE_SECRET is not set"),
    ("DEEPTHREAD_TOKEN_KEY", "DEEPTHREAD_TOKEN_KEY is not set"),
])
@pytest.mark.parametrize("blank", ["", "   "])
def test_each_missing_oauth_setting_is_one_line_saying_what_to_set(missing: str, says: str, blank: str) -> None:
    """An empty or whitespace-only value is unset, as every setting's is."""
    assert slack_lines(**{**COMPLETE, missing: blank}) == [next(line for line in slack_lines(
        **{k: v for k, v in COMPLETE.items() if k != missing}) if line.startswith(says))]


def test_http_mode_still_needs_the_signing_secret() -> None:
    (line,) = slack_lines(**{k: v for k, v in COMPLETE.items() if k != "SLACK_SIGNING_SECRET"})
    assert line.startswith("SLACK_SIGNING_SECRET is not set")


def test_a_token_key_that_is_not_a_fernet_key_says_how_to_make_one() -> None:
    (line,) = slack_lines(**{**COMPLETE, "DEEPTHREAD_TOKEN_KEY": "hunter2"})
    assert line.startswith("DEEPTHREAD_TOKEN_KEY is not a Fernet key") and "Fernet.generate_key()" in line
    assert "hunter2" not in line, "a secret is never echoed"


def test_a_worker_in_multi_workspace_mode_needs_the_token_key_to_read_threads() -> None:
    worker = {**COMPLETE, "DEEPTHREAD_SEARCH": "duckduckgo"}
    assert slack_lines("worker", **worker) == []
    (line,) = slack_lines("worker", **{**worker, "DEEPTHREAD_TOKEN_KEY": ""})
    assert line.startswith("DEEPTHREAD_TOKEN_KEY is not set")


def test_single_token_mode_stays_the_default_and_asks_for_no_oauth_setting() -> None:
    settings = Settings(SLACK_BOT_TOKEN="xoxb-1", SLACK_SIGNING_SECRET="s")  # type: ignore[call-arg]
    assert not settings.multi_workspace
    assert slack_lines(SLACK_BOT_TOKEN="xoxb-1", SLACK_SIGNING_SECRET="s", ANTHROPIC_API_KEY="k") == []


def test_an_install_flow_open_to_every_workspace_is_a_notice_naming_the_allowlist_and_the_budget() -> None:
    from bot.cli.doctor import model_notices

    notices = [n for n in model_notices(Settings(**COMPLETE)) if "INSTALL_ALLOW" in n]  # type: ignore[arg-type]
    assert len(notices) == 1 and "any Slack workspace" in notices[0] and "$50.00 a month" in notices[0]
    uncapped = Settings(**COMPLETE, DEEPTHREAD_NEW_WORKSPACE_BUDGET_USD="off")  # type: ignore[arg-type]
    assert uncapped.new_workspace_budget_usd is None
    assert any("no monthly cap" in n for n in model_notices(uncapped))
    listed = Settings(**COMPLETE, DEEPTHREAD_INSTALL_ALLOW="T0ALPHA")  # type: ignore[arg-type]
    assert not [n for n in model_notices(listed) if "INSTALL_ALLOW" in n]
    assert not [n for n in model_notices(Settings(SLACK_BOT_TOKEN="xoxb-1")) if "INSTALL_ALLOW" in n]  # type: ignore[arg-type]
    assert slack_lines(**COMPLETE) == [], "a notice, never a refusal to start"
