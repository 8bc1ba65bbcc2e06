"""The fake Slack's agent sessions and canvases answer as Slack's method pages say: argument rules,
errors, tiers, the stop button's event. The real slack_sdk client talks HTTP to it."""
from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes import slack_canvases, slack_sessions, slack_streaming
from tests.fakes.slack import TEAM_ID, FakeSlack

CHANNEL = "C0TEST"
THREAD = "1700000000.000100"


@pytest.fixture
async def client(fake_slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    yield AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")


async def error(call: object) -> str:
    with pytest.raises(SlackApiError) as raised:
        await call  # type: ignore[misc]
    return str(raised.value.response["error"])


async def test_session_methods_rules_and_errors(fake_slack: FakeSlack, client: AsyncWebClient) -> None:
    set_status = client.agents_sessions_setStatus
    assert await error(set_status(channel_id=CHANNEL, thread_ts=THREAD, status="busy")) == "invalid_status"
    assert await error(set_status(channel_id="", thread_ts=THREAD, status="processing")) == "channel_not_found"
    assert await error(set_status(channel_id=CHANNEL, status="processing")) == "thread_ts_required"
    assert await error(set_status(channel_id=CHANNEL, thread_ts=THREAD, status="processing", title="t" * 201)) == (
        "invalid_arguments")
    assert await error(set_status(channel_id=CHANNEL, thread_ts=THREAD, status="processing",
                                  initiator_user_id="nobody")) == "user_not_found"
    assert await error(client.agents_sessions_rename(channel_id=CHANNEL, thread_ts=THREAD, title="x")) == (
        "session_not_found")
    created = await set_status(channel_id=CHANNEL, thread_ts=THREAD, status="processing", title="Fees of VTI",
                               initiator_user_id="U0ANA")
    assert created["status"] == "processing" and "warning" not in created.data
    later = await set_status(channel_id=CHANNEL, thread_ts=THREAD, status="active", title="ignored after creation")
    assert later["title"] == "Fees of VTI", "the title is used only on creation"
    assert await error(client.agents_sessions_rename(channel_id=CHANNEL, thread_ts=THREAD, title="")) == "invalid_name"
    await client.agents_sessions_rename(channel_id=CHANNEL, thread_ts=THREAD, title="VTI and SCHB fees")
    session = slack_sessions.session_of(fake_slack, CHANNEL, THREAD)
    assert session is not None and session.statuses == ["processing", "active"] and session.title == "VTI and SCHB fees"
    slack_sessions.refuse_sessions(fake_slack)
    assert await error(set_status(channel_id=CHANNEL, thread_ts=THREAD, status="closed")) == "feature_disabled"


async def test_without_the_event_subscription_setstatus_warns_and_there_is_no_stop_button(
        fake_slack: FakeSlack, client: AsyncWebClient) -> None:
    fake_slack.session_stop_subscribed = False  # type: ignore[attr-defined]
    answer = await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=THREAD, status="processing")
    assert answer["warning"] == "missing_agent_session_stopped_event_subscription"
    with pytest.raises(AssertionError, match="not subscribed"):
        slack_sessions.press_stop(fake_slack, CHANNEL, THREAD, user="U0ANA")


async def test_the_stop_button_stops_the_threads_streams_and_sends_the_event(
        fake_slack: FakeSlack, client: AsyncWebClient) -> None:
    with pytest.raises(AssertionError, match="not processing"):
        slack_sessions.press_stop(fake_slack, CHANNEL, THREAD, user="U0ANA")
    await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=THREAD, status="processing")
    stream = await client.chat_startStream(channel=CHANNEL, thread_ts=THREAD, recipient_team_id=TEAM_ID,
                                           recipient_user_id="U0ANA", chunks=[{"type": "plan_update", "title": "P"}])
    envelope = slack_sessions.press_stop(fake_slack, CHANNEL, THREAD, user="U0ANA")
    event = envelope["event"]
    assert (event["type"], event["channel"], event["thread_ts"], event["user"]) == (
        "agent_session_stopped", CHANNEL, THREAD, "U0ANA")
    assert event["streaming_message_ts"] == [stream["ts"]] and envelope["team_id"] == TEAM_ID
    assert await error(client.chat_appendStream(channel=CHANNEL, ts=stream["ts"], markdown_text="more")) == (
        "stopped_by_user")
    assert [s.streaming for s in slack_streaming.streams_in(fake_slack, CHANNEL, THREAD)] == [False]
    session = slack_sessions.session_of(fake_slack, CHANNEL, THREAD)
    assert session is not None and session.status == "processing", "Slack never moves the status itself"


async def test_canvas_methods_rules_operations_and_errors(fake_slack: FakeSlack, client: AsyncWebClient) -> None:
    canvas_id = (await client.canvases_create(title="Report", document_content={
        "type": "markdown", "markdown": "## 1. Fees\n\nVTI is cheap.\n\n## Sources\n\n1. a"}))["canvas_id"]
    found = await client.canvases_sections_lookup(canvas_id=canvas_id, criteria={"section_types": ["h2"],
                                                                                 "contains_text": "1. Fees"})
    [fees] = [s["id"] for s in found["sections"]]
    [sources] = [s["id"] for s in (await client.canvases_sections_lookup(
        canvas_id=canvas_id, criteria={"section_types": ["h2"], "contains_text": "Sources"}))["sections"]]
    edit = client.canvases_edit

    def content(markdown: str) -> dict[str, str]:
        return {"type": "markdown", "markdown": markdown}

    assert await error(edit(canvas_id=canvas_id, changes=[{"operation": "insert_before",
                                                           "document_content": content("x")}])) == "invalid_arguments"
    assert await error(edit(canvas_id=canvas_id, changes=[{"operation": "replace", "document_content": content("a")},
                                                          {"operation": "delete", "section_id": fees}])) == (
        "invalid_arguments"), "one change per call"
    assert await error(edit(canvas_id=canvas_id, changes=[{"operation": "delete", "section_id": "temp:C:none"}])) == (
        "canvas_editing_failed")
    assert await error(edit(canvas_id="F0NONE", changes=[{"operation": "delete", "section_id": fees}])) == (
        "canvas_not_found")
    assert await error(client.canvases_sections_lookup(canvas_id=canvas_id, criteria={})) == "invalid_arguments"
    await edit(canvas_id=canvas_id, changes=[{"operation": "insert_before", "section_id": sources,
                                              "document_content": content("## 2. Tracking\n\nITOT tracks well.")}])
    await edit(canvas_id=canvas_id, changes=[{"operation": "replace", "section_id": fees,
                                              "document_content": content("## 1. Fees (revised ×1)\n\nVTI: 0.03%.")}])
    canvas = slack_canvases.canvas_of(fake_slack, canvas_id)
    assert canvas is not None
    assert canvas.headings() == ["1. Fees (revised ×1)", "2. Tracking", "Sources"]
    assert "VTI is cheap" not in canvas.markdown(), "replaced in place"
    assert [e["operation"] for e in canvas.edits] == ["insert_before", "replace"]
    assert await error(client.canvases_access_set(canvas_id=canvas_id, access_level="read")) == "invalid_parameters"
    await client.canvases_access_set(canvas_id=canvas_id, access_level="read", channel_ids=[CHANNEL])
    info = await client.files_info(file=canvas_id)
    assert info["file"]["permalink"] == f"https://deepthread-test.slack.com/docs/{TEAM_ID}/{canvas_id}"
    slack_canvases.disable_canvases(fake_slack)
    assert await error(client.canvases_create(title="x")) == "canvas_disabled_user_team"
    assert await error(edit(canvas_id=canvas_id, changes=[{"operation": "delete", "section_id": fees}])) == (
        "canvas_disabled_user_team")


@pytest.mark.parametrize(("method", "call"), [
    ("agents.sessions.setStatus",
     lambda c: c.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=THREAD, status="processing")),
    ("canvases.create", lambda c: c.canvases_create(title="t")),
])
async def test_the_fake_answers_429_past_a_methods_tier(fake_slack: FakeSlack, client: AsyncWebClient, method: str,
                                                       call: object) -> None:
    from tests.fakes.slack_records import TIERS

    fake_slack.enforce_tiers()
    for _ in range(TIERS[method]):
        await call(client)  # type: ignore[operator]
    with pytest.raises(SlackApiError) as limited:
        await call(client)  # type: ignore[operator]
    assert limited.value.response.status_code == 429 and limited.value.response.headers.get("Retry-After")
    assert fake_slack.count_429 == {method: 1}
