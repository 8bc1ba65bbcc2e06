"""Every message the bot sends goes out with link and media unfurling off, from one place
(bot/slack/client.py), so no sender can forget: checked over every method that posts, the list of
which is generated from the SDK and the fake Slack, so a new posting method is covered by itself."""
from __future__ import annotations

import inspect

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.client import MESSAGE_METHODS, LimitedWebClient
from tests.fakes.slack import FakeSlack

# What a method that posts takes: the message itself, in one of its forms.
MESSAGE_ARGUMENTS = {"text", "blocks", "markdown_text", "chunks", "attachments"}
NOT_POSTING = {"chat.unfurl"}  # takes blocks, but for someone else's link


def _api_name(sdk_method: str) -> str:
    return sdk_method.replace("_", ".", 1)


def _sdk_posting_methods() -> set[str]:
    found = set()
    for name, method in inspect.getmembers(AsyncWebClient, inspect.iscoroutinefunction):
        if name.startswith("_") or not name.startswith("chat_"):
            continue
        if MESSAGE_ARGUMENTS & set(inspect.signature(method).parameters):
            found.add(_api_name(name))
    return found - NOT_POSTING


def test_every_posting_method_of_the_sdk_is_sent_without_unfurls() -> None:
    sdk = _sdk_posting_methods()
    assert {"chat.postMessage", "chat.update", "chat.postEphemeral", "chat.startStream"} <= sdk
    assert sdk <= MESSAGE_METHODS, f"posting methods not covered: {sorted(sdk - MESSAGE_METHODS)}"


def test_every_posting_method_of_the_fake_slack_is_covered(fake_slack: FakeSlack) -> None:
    known = {m for m in fake_slack._methods if m.startswith("chat.")}
    posting = known - {"chat.delete", "chat.getPermalink"}
    assert posting <= MESSAGE_METHODS, sorted(posting - MESSAGE_METHODS)


@pytest.mark.parametrize("method", sorted(MESSAGE_METHODS))
@pytest.mark.parametrize("caller_asked", [None, True], ids=["unset", "caller asked for unfurls"])
async def test_the_wire_carries_unfurls_off_whatever_the_caller_passed(
        method: str, caller_asked: bool | None, fake_slack: FakeSlack) -> None:
    client = LimitedWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    posted = await client.chat_postMessage(channel="C0TEST", text="a parent")
    body = {"channel": "C0TEST", "ts": posted["ts"], "thread_ts": posted["ts"], "text": "see https://x.test/a",
            "user": "U0ANA", "markdown_text": "see https://x.test/a", "post_at": 2_000_000_000,
            "recipient_user_id": "U0ANA", "recipient_team_id": fake_slack.team_id}
    if caller_asked is not None:
        body.update(unfurl_links=caller_asked, unfurl_media=caller_asked)
    try:
        await client.api_call(method, json=body)
    except SlackApiError:
        pass  # the fake may refuse the arguments; what reached the wire is what counts
    sent = [params for name, params in fake_slack.calls if name == method][-1]
    assert sent.get("unfurl_links") in (False, "false", "0") and sent.get("unfurl_media") in (False, "false", "0"), sent
