"""Forgetting that really forgets, end to end (real serve over HTTP and a worker, real Redis, RQ's
scheduler, the fake Slack): after an admin's `forget this thread`, a person's deletion of the bot's
report, a deleted follow-up question and an uninstall, nothing that names the thread is left
anywhere (every key and value, the updates stream, every RQ record and registry); a 👍 lives no
longer than its run; only the requester or an admin switches a report's re-checks off."""

from __future__ import annotations

import httpx
from redis import Redis

from jobs import RunStore, keys
from jobs.records.feedback import FeedbackStore
from tests.e2e.stack import CHANNEL, bot_replies, post_event, start
from tests.fakes.slack import FakeSlack, message_event, sign
from tests.fakes.slack_events import FORM, app_uninstalled_event, feedback_action_form
from tests.fakes.slack_records import TEAM_ID
from tests.processes import SIGNING_SECRET, Stack, wait_for
from tests.redis_values import records_naming

ANA, BEN, ADMIN = "U0ANA", "U0BEN", "U0ADMIN"
OTHER = "C0OTHER"
DIGEST = ("Re-check:", "No changes")  # how a re-check's digest starts, whatever it found


def _bots(slack: FakeSlack, thread: str, channel: str = CHANNEL) -> list:
    return [m for m in bot_replies(slack, thread, channel) if m.user == slack.bot_user_id]


def _say(stack: Stack, slack: FakeSlack, thread: str, text: str, user: str = ANA, channel: str = CHANNEL) -> str:
    """A reply in the thread; returns the bot's answer to it."""
    before = len(_bots(slack, thread, channel))
    event = message_event(text, channel=channel, thread_ts=thread, user=user)
    slack.seed_event(event)
    assert post_event(stack, event).status_code == 200
    return wait_for(
        lambda: len(_bots(slack, thread, channel)) > before and _bots(slack, thread, channel)[-1].text,
        15,
        f"the answer to {text!r}",
    )


def _run_ids(redis: Redis, thread: str, channel: str = CHANNEL) -> list[str]:
    store = RunStore(redis)
    return wait_for(
        lambda: (
            (ids := store.thread_run_ids(TEAM_ID, channel, thread))
            and all(store.get(i).status.finished for i in ids)
            and ids
        ),
        60,
        "the thread's runs to end",
    )


def _gone(redis: Redis, needles: list[str], what: str, seconds: float = 15) -> None:
    """Waits until nothing names any of `needles`; fails listing what still does."""
    try:
        wait_for(lambda: not records_naming(redis, needles), seconds, what)
    except AssertionError:
        assert records_naming(redis, needles) == [], what


def _press(stack: Stack, body: str) -> None:
    signed = {**sign(SIGNING_SECRET, body), "Content-Type": FORM}
    assert httpx.post(stack.events_url, content=body, headers=signed).status_code == 200


def _used(stack: Stack, slack: FakeSlack, redis: Redis, thread: str, report_ts: str, channel: str) -> list[str]:
    """A thread with everything that names it: a re-check that ran (its RQ job kept a day), a weekly
    one scheduled (its job waits in RQ's scheduled registry), a 👍; returns its run ids."""
    _run_ids(redis, thread, channel)
    assert _say(stack, slack, thread, "recheck in 1 second", channel=channel).startswith("Re-check scheduled")
    wait_for(
        lambda: [m for m in _bots(slack, thread, channel) if m.text.startswith(DIGEST)],
        90,
        "the re-check's digest",
    )
    ids = _run_ids(redis, thread, channel)
    assert len(ids) == 2, [m.text for m in _bots(slack, thread, channel)]
    assert _say(stack, slack, thread, "recheck weekly", channel=channel).startswith("Re-check scheduled")
    _press(stack, feedback_action_form("helpful", user=ANA, channel=channel, message_ts=report_ts))
    wait_for(lambda: FeedbackStore(redis).verdict(ids[-1], ANA), 10, "the 👍 recorded")
    named = records_naming(redis, [thread, *ids])
    assert any(n.startswith("rq:job:recheck-") for n in named), named
    assert any(n.startswith("ScheduledJobRegistry") for n in named), named
    assert any(n.startswith(f"{keys.UPDATES_STREAM}:") for n in named), named
    return ids


def test_forget_a_deleted_report_and_an_uninstall_leave_nothing_that_names_the_thread(
    stack: Stack, fake_slack: FakeSlack, redis_url: str
) -> None:
    redis = Redis.from_url(redis_url)
    fake_slack.add_user(ADMIN, name="alex", admin=True)
    forgotten, _, forgotten_report = start(stack, fake_slack)
    deleted, _, deleted_report = start(stack, fake_slack, "expense ratio VTI vs VOO")
    uninstalled, _, uninstalled_report = start(stack, fake_slack, "expense ratio SCHB vs ITOT", channel=OTHER)
    runs = {
        forgotten: _used(stack, fake_slack, redis, forgotten, forgotten_report, CHANNEL),
        deleted: _used(stack, fake_slack, redis, deleted, deleted_report, CHANNEL),
        uninstalled: _used(stack, fake_slack, redis, uninstalled, uninstalled_report, OTHER),
    }

    said = _say(stack, fake_slack, forgotten, "forget this thread", ADMIN)
    assert said.startswith("Deleted 2 runs in 1 thread"), said
    assert records_naming(redis, [forgotten, *runs[forgotten]]) == []

    # A person (here an admin) deletes the bot's report: Slack names the bot as the deleted message's author.
    assert post_event(stack, fake_slack.deletion_event(CHANNEL, deleted_report)).status_code == 200
    _gone(redis, [deleted, *runs[deleted]], "the deleted report's thread gone")

    assert post_event(stack, app_uninstalled_event()).status_code == 200
    _gone(redis, [uninstalled, *runs[uninstalled], TEAM_ID], "the workspace's records gone")


def test_a_deleted_follow_up_question_in_someone_elses_thread_forgets_the_thread(
    stack: Stack, fake_slack: FakeSlack, redis_url: str
) -> None:
    """Ben's thread; Ana asks the bot in it, then follows up (a continuation); deleting her follow-up,
    a reply in Ben's thread, forgets what the bot kept of the thread."""
    redis = Redis.from_url(redis_url)
    bens = fake_slack.add_user_message(CHANNEL, "Our fund fees look high to me", BEN)
    asked = message_event("<@UBOT> expense ratio VTI SCHB ITOT", channel=CHANNEL, thread_ts=bens, user=ANA)
    mention = {**asked, "event": {**asked["event"], "type": "app_mention"}}
    fake_slack.seed_event(mention)
    assert post_event(stack, mention).status_code == 200
    _run_ids(redis, bens)
    follow_up = message_event("and what about their tracking error?", channel=CHANNEL, thread_ts=bens, user=ANA)
    fake_slack.seed_event(follow_up)
    assert post_event(stack, follow_up).status_code == 200
    ids = wait_for(lambda: len(found := _run_ids(redis, bens)) == 2 and found, 60, "the continuation's end")
    assert records_naming(redis, ["tracking error"]), "the follow-up is kept while it stands"

    gone = post_event(stack, fake_slack.deletion_event(CHANNEL, follow_up["event"]["ts"]))
    assert gone.status_code == 200
    _gone(redis, [bens, *ids, "tracking error"], "the thread forgotten")


def test_a_verdict_lives_no_longer_than_its_run_and_a_late_one_after_a_forget_writes_nothing(
    stack: Stack, fake_slack: FakeSlack, redis_url: str
) -> None:
    redis = Redis.from_url(redis_url)
    thread, _, report_ts = start(stack, fake_slack)
    [run_id] = _run_ids(redis, thread)
    _press(stack, feedback_action_form("helpful", user=ANA, channel=CHANNEL, message_ts=report_ts))
    wait_for(lambda: FeedbackStore(redis).verdict(run_id, ANA), 10, "the 👍 recorded")
    run_ttl = redis.ttl(keys.run_state(run_id))
    assert 0 < redis.ttl(keys.feedback(run_id)) <= run_ttl, "the verdict expires with its run, not never"

    fake_slack.add_user(ADMIN, name="alex", admin=True)
    assert _say(stack, fake_slack, thread, "forget this thread", ADMIN).startswith("Deleted 1 run")
    assert not redis.exists(keys.feedback(run_id))
    # A click that was on its way when the thread was forgotten (its run looked up just before).
    assert FeedbackStore(redis).record(run_id, BEN, "unhelpful", {}) is False
    assert not redis.exists(keys.feedback(run_id)), "no verdict outlives its run's forget"


def test_only_the_requester_or_an_admin_switches_a_reports_rechecks_off(
    stack: Stack, fake_slack: FakeSlack, redis_url: str
) -> None:
    redis = Redis.from_url(redis_url)
    fake_slack.add_user(ADMIN, name="alex", admin=True)
    thread, _, _ = start(stack, fake_slack)
    _run_ids(redis, thread)
    assert _say(stack, fake_slack, thread, "recheck weekly").startswith("Re-check scheduled")

    event = message_event("recheck off", channel=CHANNEL, thread_ts=thread, user=BEN)
    assert post_event(stack, event).status_code == 200
    refusal = wait_for(lambda: [e for e in fake_slack.ephemerals(CHANNEL) if e.user == BEN], 10, "the refusal")
    assert "Only <@U0ANA> (who asked) or a workspace admin" in refusal[0].text, refusal[0].text
    assert _say(stack, fake_slack, thread, "recheck").startswith("Re-checks: weekly"), (
        "a stranger's off changes nothing"
    )

    assert _say(stack, fake_slack, thread, "recheck off", ADMIN).startswith("Re-checks are off")
    assert _say(stack, fake_slack, thread, "recheck").startswith("No re-check is scheduled")
