"""👍 / 👎 on a finished report, end to end (serve over HTTP, a worker, real Redis, the fake Slack):
one verdict per person (a second click changes it), a 👎's reason and line kept with the run, the
verdict counted by `usage` in the channel."""

from __future__ import annotations

import httpx
from redis import Redis

from jobs import RunStore
from jobs.records.feedback import FeedbackStore
from tests.e2e.stack import CHANNEL, assert_cited_report_pinned, post_event, start
from tests.fakes.slack import FakeSlack, app_mention_event, sign
from tests.fakes.slack_events import FORM, ephemeral_action_form, feedback_action_form
from tests.fakes.slack_records import TEAM_ID
from tests.processes import SIGNING_SECRET, Stack, wait_for

ANA = "U0ANA"


def _press(stack: Stack, body: str) -> None:
    pressed = httpx.post(stack.events_url, content=body, headers={**sign(SIGNING_SECRET, body), "Content-Type": FORM})
    assert pressed.status_code == 200


def test_a_verdict_per_person_changeable_with_a_note_and_counted_in_usage(
    stack: Stack, fake_slack: FakeSlack, fake_web, redis_url: str
) -> None:
    thread, _, report_ts = start(stack, fake_slack)
    assert_cited_report_pinned(fake_slack, thread, fake_web.url)
    report = fake_slack.message(CHANNEL, report_ts)
    assert report is not None and report.blocks[-1]["type"] == "context_actions", "the final report has the buttons"
    redis = Redis.from_url(redis_url)
    [run_id] = RunStore(redis).thread_run_ids(TEAM_ID, CHANNEL, thread)
    store = FeedbackStore(redis)

    _press(stack, feedback_action_form("helpful", user=ANA, channel=CHANNEL, message_ts=report_ts))
    first = wait_for(lambda: store.verdict(run_id, ANA), 10, "the 👍 recorded")
    assert first.verdict == "helpful" and first.sections, "the sections current then are kept"
    assert not fake_slack.ephemerals(CHANNEL), "a 👍 asks nothing"

    _press(stack, feedback_action_form("unhelpful", user=ANA, channel=CHANNEL, message_ts=report_ts))
    asked = wait_for(lambda: [e for e in fake_slack.ephemerals(CHANNEL) if e.user == ANA], 10, "the 👎 question")[0]
    assert asked.thread_ts == thread and asked.blocks
    reason_block, note_block = asked.blocks[1]["block_id"], asked.blocks[2]["block_id"]
    assert [v.verdict for v in store.verdicts(run_id)] == ["unhelpful"], "one verdict per person, changed"

    values = {
        reason_block: {"feedback_reason": {"type": "static_select",
                                           "selected_option": {"text": {"type": "plain_text", "text": "A wrong figure"},
                                                               "value": "wrong_figure"}}},
        note_block: {"feedback_note": {"type": "plain_text_input", "value": "The SCHB fee is 0.02%, not 0.03%"}},
    }
    note = {"type": "plain_text_input", "action_id": "feedback_note", "block_id": note_block,
            "value": "The SCHB fee is 0.02%, not 0.03%"}
    _press(stack, ephemeral_action_form(note, values, user=ANA, channel=CHANNEL, message_ts=asked.message_ts))
    noted = wait_for(lambda: (v := store.verdict(run_id, ANA)) and v.note and v, 10, "the note recorded")
    assert (noted.reason, noted.note) == ("wrong_figure", "The SCHB fee is 0.02%, not 0.03%")

    # The same 👎 again is no new verdict, and keeps the note.
    _press(stack, feedback_action_form("unhelpful", user=ANA, channel=CHANNEL, message_ts=report_ts))
    _press(stack, feedback_action_form("helpful", user="U0BEN", channel=CHANNEL, message_ts=report_ts))
    wait_for(lambda: store.verdict(run_id, "U0BEN"), 10, "Ben's 👍")
    assert len(store.verdicts(run_id)) == 2 and store.verdict(run_id, ANA).note == noted.note  # type: ignore[union-attr]
    assert len([e for e in fake_slack.ephemerals(CHANNEL) if e.user == ANA]) == 1, "asked once"

    ask = app_mention_event("usage", channel=CHANNEL, user=ANA)
    ts = fake_slack.seed_event(ask)
    assert post_event(stack, ask).status_code == 200
    reply = wait_for(lambda: [m for m in fake_slack.thread(CHANNEL, ts) if m.ts != ts], 15, "the usage reply")[0].text
    assert "*Feedback:* 1 of 1 reports rated · 0% rated helpful" in reply, reply
