"""HTTP mode never runs without request verification, whatever SLACK_APP_TOKEN holds: a blank
app token is no token (HTTP mode), and HTTP mode checks every request's signature. Through a real
`deepthread serve` process and the fake Slack."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest
from redis import Redis

from tests.e2e.stack import CHANNEL, serve_only, stack_environment
from tests.fakes.slack import FakeSlack, app_mention_event, sign
from tests.fakes.slack_events import FORM, block_action_form, slash_command_form
from tests.processes import DEEPTHREAD, ROOT, SIGNING_SECRET, environment

BLANK_APP_TOKENS = ["", "   "]


def _requests(message_ts: str) -> dict[str, tuple[str, str]]:
    """One of each kind of request Slack sends: (body, content type)."""
    import json

    return {
        "event": (json.dumps(app_mention_event("budget workspace off", channel=CHANNEL, user="U0ADMIN")),
                  "application/json"),
        "slash command": (slash_command_form("budget workspace off", user="U0ADMIN"), FORM),
        "action": (block_action_form("go_deeper", message_ts=message_ts), FORM),
    }


@pytest.mark.parametrize("blank", BLANK_APP_TOKENS, ids=repr)
def test_unsigned_requests_get_401_and_start_nothing_when_the_app_token_is_blank(
        tmp_path: Path, blank: str, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    fake_slack.admins.add("U0ADMIN")
    env = {**stack_environment(redis_url, fake_slack, fake_model, fake_web), "SLACK_APP_TOKEN": blank}
    with serve_only(env, tmp_path / "serve.log") as (_, stack):
        for kind, (body, content_type) in _requests("1700000000.000100").items():
            unsigned = httpx.post(stack.events_url, content=body, headers={"Content-Type": content_type}, timeout=10)
            assert unsigned.status_code == 401, kind
            forged = httpx.post(stack.events_url, content=body, timeout=10,
                                headers={**sign("not-the-secret", body), "Content-Type": content_type})
            assert forged.status_code == 401, kind
        # Signed, the same slash command is answered: HTTP mode is on, and it verifies.
        body = slash_command_form("usage", user="U0ANA")
        signed = httpx.post(stack.events_url, content=body, timeout=10,
                            headers={**sign(SIGNING_SECRET, body), "Content-Type": FORM})
        assert signed.status_code == 200 and "Spend in" in signed.text
    time.sleep(0.3)
    writes = [m for m, _ in fake_slack.calls if m.startswith(("chat.", "pins.", "reactions."))]
    assert writes == [], "no unsigned request reached a listener"
    keys = [k.decode() for k in Redis.from_url(redis_url).keys("*")]
    assert not [k for k in keys if ":budgets:" in k or ":run:" in k], keys


@pytest.mark.parametrize(("blank", "secret"), [("", ""), ("   ", "  "), (None, " ")], ids=repr)
def test_serve_refuses_http_mode_without_a_signing_secret_naming_the_variable(
        blank: str | None, secret: str, redis_url: str, fake_slack: FakeSlack) -> None:
    env = environment(SLACK_BOT_TOKEN="xoxb-test", SLACK_SIGNING_SECRET=secret, SLACK_API_URL=f"{fake_slack.url}/api/",
                      REDIS_URL=redis_url, PORT="1")
    if blank is not None:
        env["SLACK_APP_TOKEN"] = blank
    done = subprocess.run(DEEPTHREAD + ["serve"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "SLACK_SIGNING_SECRET" in done.stderr and "Traceback" not in done.stderr
    assert fake_slack.calls == [], "it stopped before reaching Slack"
