"""What is kept and how it is forgotten, end to end (real serve in HTTP mode and a worker, the fake
Slack): an admin's `forget this thread` (anyone else is refused), a deleted question or report,
a deleted channel and an uninstall delete that thread's, channel's or workspace's data; and the
maintenance round deletes a run `DEEPTHREAD_RETENTION_DAYS` after it finished (its record aged by
rewriting the stored time, the round's turn given back by deleting its lease)."""
from __future__ import annotations

from datetime import timedelta

from redis import Redis

from agent.events import utcnow
from jobs import RunStore, keys
from jobs.budgets.spend import Spend
from tests.e2e.stack import CHANNEL, bot_replies, post_event, start
from tests.fakes.slack import FakeSlack, message_event
from tests.fakes.slack_events import app_uninstalled_event, channel_deleted_event
from tests.fakes.slack_records import TEAM_ID
from tests.helpers import keys_holding
from tests.processes import Stack, wait_for

ADMIN, BEN = "U0ADMIN", "U0BEN"


def _final(redis: Redis, thread: str, channel: str = CHANNEL) -> list[str]:
    """The thread's run ids once every one has ended."""
    store = RunStore(redis)
    return wait_for(lambda: (ids := store.thread_run_ids(TEAM_ID, channel, thread))
                    and all(store.get(i).status.finished for i in ids) and ids, 30, "the run's end")


def _say(stack: Stack, slack: FakeSlack, thread: str, text: str, user: str, channel: str = CHANNEL) -> None:
    reply = message_event(text, channel=channel, thread_ts=thread, user=user)
    slack.seed_event(reply)
    assert post_event(stack, reply).status_code == 200


def _forgotten(redis: Redis, run_ids: list[str], thread: str) -> bool:
    return not any(keys_holding(redis, n) for n in [*run_ids, f"{thread}"])


def test_forget_by_an_admin_only_and_deleted_questions_and_reports_delete_their_thread(
        stack: Stack, fake_slack: FakeSlack, redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    fake_slack.add_user(ADMIN, name="alex", admin=True)
    forget_me, _, _ = start(stack, fake_slack)
    question_gone, _, _ = start(stack, fake_slack, "expense ratio VTI vs VOO")
    report_gone, _, report_ts = start(stack, fake_slack, "expense ratio SCHB vs ITOT")
    runs = {t: _final(redis, t) for t in (forget_me, question_gone, report_gone)}

    _say(stack, fake_slack, forget_me, "forget this thread", BEN)
    refusal = wait_for(lambda: [e for e in fake_slack.ephemerals(CHANNEL) if e.user == BEN], 10, "the refusal")
    assert "Only a workspace admin" in refusal[0].text
    assert redis.exists(keys.run_state(runs[forget_me][0])), "a non-admin's forget deletes nothing"

    _say(stack, fake_slack, forget_me, "forget this thread", ADMIN)
    said = wait_for(lambda: [m for m in bot_replies(fake_slack, forget_me) if "Deleted" in m.text], 10, "what went")
    assert "Deleted 1 run in 1 thread" in said[0].text
    assert _forgotten(redis, runs[forget_me], forget_me)

    # The question deleted: it has replies, so Slack tombstones it (message_changed).
    assert post_event(stack, fake_slack.deletion_event(CHANNEL, question_gone)).status_code == 200
    wait_for(lambda: _forgotten(redis, runs[question_gone], question_gone), 10, "the deleted question's thread gone")
    # The report deleted by a person (message_deleted in the thread, the bot named as its author).
    assert post_event(stack, fake_slack.deletion_event(CHANNEL, report_ts)).status_code == 200
    wait_for(lambda: _forgotten(redis, runs[report_gone], report_gone), 10, "the deleted report's thread gone")
    assert not keys_holding(redis, "expense ratio"), "no question is kept anywhere"


def test_retention_a_deleted_channel_and_an_uninstall_delete_what_they_name(
        stack: Stack, fake_slack: FakeSlack, redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    aged, _, _ = start(stack, fake_slack, channel="C0AGED")
    deleted, _, _ = start(stack, fake_slack, "expense ratio VTI vs VOO", channel="C0GONE")
    kept, _, _ = start(stack, fake_slack, "expense ratio SCHB vs ITOT", channel="C0KEPT")
    aged_ids, deleted_ids = _final(redis, aged, "C0AGED"), _final(redis, deleted, "C0GONE")
    kept_ids = _final(redis, kept, "C0KEPT")

    # The round through serve and the worker: the run finished 91 days ago (its stored time rewritten).
    long_ago = (utcnow() - timedelta(days=91)).isoformat()
    redis.hset(keys.run_state(aged_ids[0]), "finished_at", long_ago)
    redis.delete(keys.RETENTION_LEASE)  # the round's next turn now, not in ten minutes
    wait_for(lambda: _forgotten(redis, aged_ids, aged), 30, "the aged run deleted by the maintenance round")
    assert all(redis.exists(keys.run_state(i)) for i in deleted_ids + kept_ids), "younger runs kept"
    assert Spend(redis).month(TEAM_ID).total.runs == 3, "the ledger keeps the aged run in its totals"

    assert post_event(stack, channel_deleted_event("C0GONE")).status_code == 200
    wait_for(lambda: _forgotten(redis, deleted_ids, deleted), 10, "the deleted channel's threads gone")
    assert all(redis.exists(keys.run_state(i)) for i in kept_ids), "another channel's thread is kept"

    assert post_event(stack, app_uninstalled_event()).status_code == 200
    wait_for(lambda: _forgotten(redis, kept_ids, kept), 10, "the workspace's runs gone")
    assert not keys_holding(redis, TEAM_ID), "nothing of the workspace is kept: settings, totals, marks"
