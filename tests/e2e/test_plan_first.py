"""Plan first, end to end: real serve and worker, the fake Slack and model. A `plan first:` question
posts a plan (key questions, outline, expected budget) with Approve and Change, spends nothing on
research until the requester approves (a thread reply redrafts it; someone else's click is refused),
then runs; a plan nobody approves expires with a note, and nothing is researched."""
from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path

import httpx

from tests.e2e.stack import CHANNEL, block_text, bot_replies, main_requests, post_event, report_text
from tests.fakes.policies import PlanFirstPolicy, is_planning
from tests.fakes.slack import FakeSlack, app_mention_event, message_event, sign
from tests.fakes.slack_events import block_action
from tests.processes import SIGNING_SECRET, Stack, deepthread_stack, wait_for

QUESTION = "plan first: expense ratio VTI SCHB ITOT"


def press(stack: Stack, action: str, *, user: str, message_ts: str) -> None:
    body = "payload=" + urllib.parse.quote(json.dumps(block_action(action, user=user, channel=CHANNEL,
                                                                    message_ts=message_ts)))
    headers = {**sign(SIGNING_SECRET, body), "Content-Type": "application/x-www-form-urlencoded"}
    assert httpx.post(stack.events_url, content=body, headers=headers, timeout=10).status_code == 200


def research_requests(fake_model) -> list[dict]:
    return [r for r in fake_model.requests if not is_planning(r)]


def ask(stack: Stack, slack: FakeSlack) -> tuple[str, str, str]:
    mention = app_mention_event(QUESTION, channel=CHANNEL)
    thread = slack.seed_event(mention)
    assert post_event(stack, mention).status_code == 200
    replies = wait_for(lambda: len(bot_replies(slack, thread)) >= 2 and bot_replies(slack, thread), 15, "run messages")
    return thread, replies[0].ts, replies[1].ts


def progress_of(slack: FakeSlack, ts: str) -> str:
    return block_text(slack.message(CHANNEL, ts))


def test_a_plan_first_question_spends_nothing_until_approved_then_runs(
        tmp_path: Path, redis_url, fake_slack, fake_model, fake_web) -> None:
    fake_model.policy = PlanFirstPolicy()
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url) as stack:
        thread, progress, report = ask(stack, fake_slack)
        plan = wait_for(lambda: "Plan for approval" in progress_of(fake_slack, progress) and progress_of(fake_slack, progress),
                        30, "the plan")
        assert "What does each fund charge?" in plan and "1. Expense ratios" in plan and "about 12 model requests" in plan
        buttons = fake_slack.message(CHANNEL, progress).blocks[-1]["elements"]
        assert [b["action_id"] for b in buttons] == ["approve_plan", "change_plan"]
        wait_for(lambda: "Plan awaiting approval" in report_text(fake_slack, report), 15, "the report's status")

        # A change asked in the thread redrafts the plan; still nothing researched.
        reply = message_event("also cover tracking error", channel=CHANNEL, thread_ts=thread, user="U0ANA")
        assert post_event(stack, reply).status_code == 200
        wait_for(lambda: "And: also cover tracking error" in progress_of(fake_slack, progress), 30, "the redrafted plan")
        time.sleep(1.0)
        assert research_requests(fake_model) == [] and fake_web.requests == [], "nothing spent beyond planning"
        assert len([r for r in fake_model.requests if is_planning(r)]) == 2

        # Someone else cannot approve it; the requester can, and the research runs on the approved plan.
        press(stack, "approve_plan", user="U0BEN", message_ts=progress)
        wait_for(lambda: any("can approve this plan" in e.text for e in fake_slack.ephemerals(CHANNEL)), 10,
                 "the refusal")
        assert research_requests(fake_model) == []
        press(stack, "approve_plan", user="U0ANA", message_ts=progress)
        final = wait_for(lambda: "Final" in report_text(fake_slack, report) and report_text(fake_slack, report), 60,
                         "the researched report")
    assert "*Sources*" in final
    first = [r for r in main_requests(fake_model) if not is_planning(r)][0]["messages"][0]["content"][0]["text"]
    assert "<approved_plan>" in first and "And: also cover tracking error" in first, "the research starts from the plan"
    assert any("Plan approved by <@U0ANA>" in m.text for m in fake_slack.thread(CHANNEL, thread))


def test_a_plan_nobody_approves_expires_with_a_note_and_nothing_is_researched(
        tmp_path: Path, redis_url, fake_slack, fake_model, fake_web) -> None:
    fake_model.policy = PlanFirstPolicy()
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_PLAN_EXPIRY_MINUTES="0.05") as stack:
        _, progress, report = ask(stack, fake_slack)
        wait_for(lambda: "Plan for approval" in progress_of(fake_slack, progress), 30, "the plan")
        ended = wait_for(lambda: "Stopped" in progress_of(fake_slack, progress) and progress_of(fake_slack, progress),
                         30, "the plan to expire")
        press(stack, "approve_plan", user="U0ANA", message_ts=progress)
        wait_for(lambda: any("no longer awaiting approval" in e.text for e in fake_slack.ephemerals(CHANNEL)), 10,
                 "a late approval is refused")
    assert "the plan was not approved within" in ended and "nothing was researched" in ended, ended
    assert research_requests(fake_model) == [] and fake_web.requests == []
    assert "Stopped" in report_text(fake_slack, report)


def test_an_admin_turns_plan_first_on_for_a_channel_and_its_questions_are_planned(
        tmp_path: Path, redis_url, fake_slack, fake_model, fake_web) -> None:
    fake_model.policy = PlanFirstPolicy()
    fake_slack.admins.add("U0ADM")
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url) as stack:
        for user, text in (("U0BEN", "plan first on"), ("U0ADM", "plan first on")):
            command = app_mention_event(text, channel=CHANNEL, user=user)
            ts = fake_slack.seed_event(command)
            assert post_event(stack, command).status_code == 200
            wait_for(lambda ts=ts: bot_replies(fake_slack, ts), 10, f"the answer to {user}")
        answers = [m.text for m in fake_slack.messages(CHANNEL) if m.user == "UBOT"]
        assert "Only a workspace admin" in answers[0] and "Plan first is on in this channel" in answers[1]
        mention = app_mention_event("expense ratio VTI SCHB ITOT", channel=CHANNEL)
        thread = fake_slack.seed_event(mention)
        assert post_event(stack, mention).status_code == 200
        progress = wait_for(lambda: len(bot_replies(fake_slack, thread)) >= 2 and bot_replies(fake_slack, thread)[0].ts,
                            15, "run messages")
        wait_for(lambda: "Plan for approval" in progress_of(fake_slack, progress), 30, "the plan")
    assert research_requests(fake_model) == []
