"""A run as a Slack agent session, end to end: real serve and worker processes, real Redis, the
real Slack and Anthropic clients talking to the fakes (the fake Slack speaks agents.sessions.* and
sends agent_session_stopped when its stop button is pressed)."""
from __future__ import annotations

import re

from tests.e2e.stack import CHANNEL, block_text, post_event, start
from tests.e2e.stack import report_text as report
from tests.fakes import slack_sessions
from tests.fakes.policies import SteadyPolicy, slow_page
from tests.fakes.slack import FakeSlack, reaction_added_event
from tests.processes import Stack, wait_for

QUESTION = "expense ratio VTI SCHB ITOT"


def statuses(slack: FakeSlack, thread: str) -> list[str]:
    session = slack_sessions.session_of(slack, CHANNEL, thread)
    return list(session.statuses) if session else []


def test_the_session_stop_button_ends_the_run_with_its_report_and_moves_the_session_on(
        stack: Stack, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    fake_web.slow_seconds = 40
    fake_model.policy = SteadyPolicy(turns=50, slow_url=slow_page(fake_web))
    thread, progress, report_ts = start(stack, fake_slack, QUESTION)
    wait_for(lambda: statuses(fake_slack, thread) == ["processing"], 10, "the thread to be a processing session")
    session = slack_sessions.session_of(fake_slack, CHANNEL, thread)
    assert session is not None and session.title == QUESTION and session.initiator_user_id == "U0ANA"
    wait_for(lambda: "Fees" in report(fake_slack, report_ts), 15, "the first section")

    clicked = slack_sessions.press_stop(fake_slack, CHANNEL, thread, user="U0ANA")
    assert post_event(stack, clicked).status_code == 200
    assert post_event(stack, clicked, headers={"X-Slack-Retry-Num": "1"}).status_code == 200  # Slack's retry
    wait_for(lambda: "Stopped" in block_text(fake_slack.message(CHANNEL, progress)), 15, "the stop")
    assert fake_web.slow_served == 0, "stopped during the 40 s page, not after it"
    text = wait_for(lambda: "Stopped by" in report(fake_slack, report_ts) and report(fake_slack, report_ts),
                    10, "the report to say who stopped it")
    assert re.search(r"Stopped by (<@|&lt;@)U0ANA", text) and "Fees" in text, text
    wait_for(lambda: statuses(fake_slack, thread)[-1:] == ["active"], 10, "the session moved on")
    assert statuses(fake_slack, thread) == ["processing", "active"], "moved once, by us: Slack never moves it"
    assert not fake_slack.calls_of("assistant.threads.setStatus"), "the session is the run's only indicator"


def test_a_strangers_click_on_the_stop_button_is_refused_privately_and_the_run_goes_on(
        stack: Stack, fake_slack: FakeSlack, fake_model) -> None:
    fake_model.delay = 0.2
    fake_model.policy = SteadyPolicy(turns=20)
    thread, progress, _ = start(stack, fake_slack, QUESTION)
    wait_for(lambda: statuses(fake_slack, thread) == ["processing"], 10, "the processing session")
    clicked = slack_sessions.press_stop(fake_slack, CHANNEL, thread, user="U0STRANGER")
    assert post_event(stack, clicked).status_code == 200
    note = wait_for(lambda: fake_slack.ephemerals(CHANNEL), 10, "the private answer")
    assert note[0].user == "U0STRANGER"
    assert "Only <@U0ANA> (who asked) or a workspace admin can stop this run." in note[0].text
    wait_for(lambda: "Done" in block_text(fake_slack.message(CHANNEL, progress)), 40, "the run to finish anyway")
    wait_for(lambda: statuses(fake_slack, thread) == ["processing", "active"], 10, "the finished session")


def test_a_workspace_without_sessions_falls_back_to_the_status_and_the_reaction_once_decided(
        stack: Stack, fake_slack: FakeSlack, fake_model) -> None:
    slack_sessions.refuse_sessions(fake_slack)
    fake_model.delay = 0.2
    fake_model.policy = SteadyPolicy(turns=30)
    first, progress, report_ts = start(stack, fake_slack, QUESTION)
    wait_for(lambda: fake_slack.status_of(CHANNEL, first) == "is researching…", 15, "the assistant status")
    reaction = reaction_added_event("octagonal_sign", user="U0ANA", item_channel=CHANNEL, item_ts=report_ts)
    assert post_event(stack, reaction).status_code == 200  # the reaction still stops it
    wait_for(lambda: "Stopped" in block_text(fake_slack.message(CHANNEL, progress)), 15, "the stop")
    wait_for(lambda: fake_slack.status_of(CHANNEL, first) == "", 10, "the status cleared")

    fake_model.policy = SteadyPolicy(turns=2)
    second, progress, _ = start(stack, fake_slack, "fees of SCHB")
    wait_for(lambda: "Done" in block_text(fake_slack.message(CHANNEL, progress)), 30, "the second run")
    assert any(s[1] == second for s in fake_slack.statuses), "the second run has the assistant status too"
    assert len(fake_slack.calls_of("agents.sessions.setStatus")) == 1, "the refusal is remembered for the workspace"
    assert slack_sessions.session_of(fake_slack, CHANNEL, first) is None
    log = (stack.logs / "serve.log").read_text()
    assert log.count("refused agent sessions") == 1, "logged once"


def test_in_stream_mode_the_stop_button_stops_the_streams_and_the_run_and_the_end_shows_below(
        tmp_path, redis_url, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    from tests.e2e.stack import bot_replies
    from tests.fakes import slack_streaming
    from tests.processes import deepthread_stack

    fake_web.slow_seconds = 40
    fake_model.policy = SteadyPolicy(turns=50, slow_url=slow_page(fake_web))
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_PROGRESS="stream") as stack:
        thread, _, report_ts = start(stack, fake_slack, QUESTION)
        wait_for(lambda: statuses(fake_slack, thread) == ["processing"], 10, "the processing session")
        wait_for(lambda: "Fees" in report(fake_slack, report_ts), 20, "the first section")
        clicked = slack_sessions.press_stop(fake_slack, CHANNEL, thread, user="U0ANA")
        assert clicked["event"]["streaming_message_ts"], "Slack stopped the run's live stream"
        assert post_event(stack, clicked).status_code == 200
        wait_for(lambda: "Stopped by" in report(fake_slack, report_ts), 20, "the report's stop line")

        def ended() -> bool:
            shown = slack_streaming.streams_in(fake_slack, CHANNEL, thread)
            return bool(shown) and not shown[-1].streaming and "Stopped" in shown[-1].text

        wait_for(ended, 30, "the end state shown below, in a stream of its own")
        wait_for(lambda: statuses(fake_slack, thread)[-1:] == ["active"], 10, "the session moved on")
    assert fake_web.slow_served == 0, "stopped during the slow page"
    assert len([r for r in bot_replies(fake_slack, thread) if r.ts == report_ts]) == 1
