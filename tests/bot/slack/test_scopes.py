"""Slack scopes match what the code calls: the manifest, the bot's list and a scope-enforcing fake.

The fake Slack grants the token exactly the manifest's bot scopes (reported in `x-oauth-scopes`)
and answers a method called without its scope with `missing_scope`, `needed` and `provided`, as
Slack does. The `fake_slack` fixture fails any test whose traffic met such a refusal, so the whole
suite's Slack traffic is checked; the tests here check the code statically and the fake itself.
"""
from __future__ import annotations

import re

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.scopes import REQUIRED_BOT_SCOPES
from tests.fakes.scopes import APP_LEVEL_SCOPES, HISTORY_SCOPES, METHOD_SCOPES, READ_SCOPES, manifest_bot_scopes
from tests.fakes.slack import FakeSlack
from tests.helpers import api_methods_of, sdk_calls_in_code
from tests.paths import ROOT


def test_every_slack_method_the_code_calls_is_granted_by_the_manifest() -> None:
    granted = manifest_bot_scopes()
    calls = sdk_calls_in_code()
    assert "chat_update" in calls and "pins_add" in calls, "the scan finds the calls we know of"
    problems = []
    for sdk_name, files in sorted(calls.items()):
        methods = api_methods_of(sdk_name)
        for method in sorted(methods):
            if method in APP_LEVEL_SCOPES:
                continue  # the app-level token's scope (Socket Mode), not a bot scope
            if method not in METHOD_SCOPES:
                problems.append(f"{method} ({', '.join(sorted(files))}): teach tests/fakes/scopes.py its scope")
                continue
            needed = METHOD_SCOPES[method]
            # By the conversation's kind: each kind's scope must be granted (the code reads every kind).
            kinds = {("<history>",): HISTORY_SCOPES, ("<read>",): READ_SCOPES}.get(needed)
            options = [(scope,) for scope in kinds.values()] if kinds is not None else [needed]
            for scopes in options:
                if scopes and not granted & set(scopes):
                    problems.append(f"{method} ({', '.join(sorted(files))}) needs {' or '.join(scopes)}")
    assert not problems, "manifest.yml lacks scopes the code needs:\n" + "\n".join(problems)


def test_the_manifest_asks_for_exactly_the_scopes_the_bot_declares() -> None:
    assert manifest_bot_scopes() == set(REQUIRED_BOT_SCOPES)


def test_stopping_someone_elses_run_is_covered_users_info_needs_users_read() -> None:
    assert "users_info" in sdk_calls_in_code()
    assert "users:read" in manifest_bot_scopes()


async def test_a_method_called_without_its_scope_is_refused_as_slack_refuses_it(fake_slack: FakeSlack) -> None:
    fake_slack.scopes = manifest_bot_scopes() - {"pins:write"}
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    posted = await client.chat_postMessage(channel="C1", text="hello")
    assert "chat:write" in posted.headers["x-oauth-scopes"].split(",")
    with pytest.raises(SlackApiError) as refused:
        await client.pins_add(channel="C1", timestamp=posted["ts"])
    assert refused.value.response["error"] == "missing_scope"
    assert refused.value.response["needed"] == "pins:write"
    assert "pins:write" not in refused.value.response["provided"].split(",")
    assert fake_slack.scope_refusals == [("pins.add", "pins:write")]


async def test_history_scope_depends_on_the_kind_of_conversation(fake_slack: FakeSlack) -> None:
    fake_slack.scopes = {"chat:write", "channels:history"}
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    public = fake_slack.add_user_message("C1", "a question", "U1")
    private = fake_slack.add_user_message("G1", "a question", "U1")
    await client.conversations_replies(channel="C1", ts=public)  # public channel: granted
    with pytest.raises(SlackApiError) as refused:
        await client.conversations_replies(channel="G1", ts=private)
    assert refused.value.response["needed"] == "groups:history"


def test_the_manifest_declares_the_agent_and_subscribes_to_its_stop_event() -> None:
    """Without agent_view Slack makes no sessions; without the event, users get no stop button; and
    every event the manifest subscribes to has a listener."""
    import yaml

    from tests.fakes.scopes import MANIFEST

    manifest = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert manifest["features"]["agent_view"]["agent_description"]
    assert "assistant:write" in manifest["oauth_config"]["scopes"]["bot"], "declaring the agent adds it"
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert "agent_session_stopped" in events
    listened = set()
    for path in sorted((ROOT / "bot" / "surface" / "listeners").glob("*.py")):
        listened |= set(re.findall(r'@app\.event\("([\w.]+)"\)', path.read_text(encoding="utf-8")))
    subscribed = {e.split(".")[0] for e in events}  # message.channels … arrive as "message"
    assert subscribed <= listened, f"subscribed without a listener: {subscribed - listened}"
