"""Re-checks that post only what changed: `recheck …` in a thread schedules a re-check with RQ's
scheduler; the re-check is a continuation with a fixed brief that revises only what changed,
and serve posts one digest of it. Real serve and worker processes, real Redis, fake
Slack/model/web, except where a test drives the jobs API itself (named so)."""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from redis import Redis
from rq import Queue
from rq.job import Job
from rq.registry import ScheduledJobRegistry

from agent.events import Source, utcnow
from agent.report import Revision, Section
from bot.desk.recheck import parse_recheck
from bot.desk.recheck_digest import digest, figure_changes
from jobs import Run, RunStatus, RunStore, keys
from jobs.upkeep.recheck import WEEK_SECONDS, RecheckRun, Rechecks
from jobs.budgets.spend import Spend
from tests.e2e.stack import CHANNEL, block_text, bot_replies, post_event
from tests.fakes.anthropic import text_reply, tool_reply
from tests.fakes.policies import _blocks, _text, extract, is_constraints, is_extraction
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_events import app_mention_event, message_event
from tests.processes import Stack, deepthread_stack, wait_for

TEAM = "T0TEST"  # the fake's workspace (tests/fakes/slack_records.py)
OLD_FEE = "Vanguard Total Stock Market ETF (VTI): expense ratio 0.04% as of January 2024."
HOLDINGS = "Vanguard Total Stock Market ETF (VTI) holds 3,600 stocks."
NEW_FEE = "Vanguard fact sheet, 31 March 2025: VTI expense ratio 0.03%, lowered from 0.04%."


# --- the scripted model ------------------------------------------------------------------


def _marker_of(results: str, needle: str) -> str | None:
    found = re.search(rf"\[(s\d+)\][^\n]*{re.escape(needle)}", results)
    return f"[{found.group(1)}]" if found else None


class RecheckPolicy:
    """The first run searches and writes two sections (Fees citing the 0.04% passage, Holdings);
    a re-check (its opening carries the fixed brief) searches once more and revises Fees only
    when a fresh passage states a fee the section does not, then answers."""

    def __call__(self, request: dict[str, Any]) -> Any:
        if is_extraction(request):
            return extract(request)
        messages = request["messages"]
        opening = _text(messages[0])
        calls = [b["name"] for m in messages if m["role"] == "assistant" for b in _blocks(m) if b["type"] == "tool_use"]
        forced = (request.get("tool_choice") or {}).get("type") == "none"
        results = _text(messages[-1])
        if "Scheduled re-check" in opening:
            return self._recheck(opening, calls, results, forced)
        if not calls and not forced:
            return tool_reply(("web_search", {"query": "vti expense ratio holdings"}))
        if calls == ["web_search"] and not forced:
            fee, holdings = _marker_of(results, "0.04%"), _marker_of(results, "3,600")
            assert fee and holdings, results
            return tool_reply(("write_section", {"title": "Fees", "body": f"VTI's expense ratio is 0.04% {fee}."}),
                              ("write_section", {"title": "Holdings", "body": f"VTI holds 3,600 stocks {holdings}."}))
        return text_reply("Found: two passages. Missing: nothing.\n<summary>VTI is a broad, cheap fund.</summary>")

    @staticmethod
    def _recheck(opening: str, calls: list[str], results: str, forced: bool) -> Any:
        if not calls and not forced:
            return tool_reply(("web_search", {"query": "vti expense ratio fact sheet latest"}))
        fees = re.search(r'^- (sec\d+) "Fees": (.*)$', opening, re.M)
        fresh = _marker_of(results, "0.03%")
        if calls == ["web_search"] and not forced and fees and fresh and "0.03%" not in fees.group(2):
            return tool_reply(("revise_section", {
                "section_id": fees.group(1), "body": f"VTI's expense ratio is 0.03% {fresh}.",
                "reason": "Vanguard lowered the fee (fact sheet of 31 March 2025)"}))
        return text_reply("Found: the fee re-checked. Missing: nothing.\n<summary>VTI is a broad, cheap fund.</summary>")


# --- helpers -------------------------------------------------------------------------------


@pytest.fixture
def stack(tmp_path: Path, redis_url: str, fake_slack, fake_model, fake_web) -> Iterator[Stack]:
    fake_model.policy = RecheckPolicy()
    fake_web.add_result("/pages/vti-overview.html", "VTI overview", f"{OLD_FEE} {HOLDINGS}", match="vti")
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url,
                          model_url=fake_model.url, web_url=fake_web.url) as s:
        yield s


def researched_thread(stack: Stack, slack: FakeSlack) -> tuple[str, str]:
    """A question answered in a thread: (thread ts, report ts) once the report is final."""
    envelope = app_mention_event("What does VTI cost, and what does it hold?", channel=CHANNEL)
    thread = slack.seed_event(envelope)
    assert post_event(stack, envelope).status_code == 200
    replies = wait_for(lambda: len(bot_replies(slack, thread)) >= 2 and bot_replies(slack, thread), 10, "run messages")
    report_ts = replies[1].ts
    wait_for(lambda: "Final" in report(slack, report_ts), 30, "the first report")
    return thread, report_ts


def report(slack: FakeSlack, ts: str) -> str:
    return block_text(slack.message(CHANNEL, ts))


def say(stack: Stack, slack: FakeSlack, thread: str, text: str) -> str:
    """A reply in the thread; returns the bot's answer to it."""
    before = len(bot_replies(slack, thread))
    event = message_event(text, channel=CHANNEL, thread_ts=thread, user="U0ANA")
    assert post_event(stack, event).status_code == 200
    return wait_for(lambda: len(bot_replies(slack, thread)) > before and bot_replies(slack, thread)[-1].text, 10,
                    f"the answer to {text!r}")


def thread_texts(slack: FakeSlack, thread: str) -> list[str]:
    return [m.text for m in bot_replies(slack, thread)]


def runs_of(redis_url: str, thread: str) -> list[Any]:
    store = RunStore(Redis.from_url(redis_url))
    return [store.get(run_id) for run_id in store.thread_run_ids(TEAM, CHANNEL, thread)]


def scheduled_job_ids(redis_url: str) -> list[str]:
    return ScheduledJobRegistry(queue=Queue(keys.QUEUE, connection=Redis.from_url(redis_url))).get_job_ids()


# --- end to end ------------------------------------------------------------------------------


def test_a_recheck_revises_the_changed_section_posts_the_change_then_no_changes_next_time(
        stack, fake_slack, fake_model, fake_web, redis_url) -> None:
    thread, report_ts = researched_thread(stack, fake_slack)
    assert "0.04%" in report(fake_slack, report_ts)
    fake_web.add_result("/pages/vti-factsheet-2025.html", "VTI fact sheet, March 2025", NEW_FEE, match="latest")

    confirmation = say(stack, fake_slack, thread, "recheck in 2 seconds")
    assert confirmation.startswith("Re-check scheduled: once; next check "), confirmation
    wait_for(lambda: "next check" in report(fake_slack, report_ts), 10, "the footer to show the next check")

    changed = wait_for(lambda: [t for t in thread_texts(fake_slack, thread) if t.startswith("Re-check: ")], 60,
                       "the change digest")[0]
    assert "1 section changed since" in changed, changed
    assert re.search(r"\*Fees\*: 0\.04% → 0\.03% \(<http://127\.0\.0\.1:\d+/pages/vti-factsheet-2025\.html"
                     r"\|VTI fact sheet, March 2025>\) — Vanguard lowered the fee", changed), changed
    assert "Holdings" not in changed, "only the section whose facts changed"
    text = report(fake_slack, report_ts)
    assert "VTI's expense ratio is 0.03%" in text and "revised ×1" in text and "3,600 stocks" in text
    assert "next check" not in text, "a single check leaves nothing scheduled"
    first, recheck = runs_of(redis_url, thread)
    assert recheck.run.parent_run_id == first.run.id and recheck.status == RunStatus.completed
    [fees] = [s for s in recheck.sections if s.title == "Fees"]
    assert [r.body for r in fees.revisions] == [first.sections[0].body], "history kept"
    [holdings] = [s for s in recheck.sections if s.title == "Holdings"]
    assert holdings.revisions == [], "an unchanged section is left alone"
    opening = next(_text(r["messages"][0]) for r in fake_model.requests
                   if not is_extraction(r) and "Scheduled re-check" in _text(r["messages"][0]))
    assert "<follow_up>\nScheduled re-check" in opening and "revise_section" in opening
    assert not any(is_constraints(r) and "Scheduled re-check" in _text(r["messages"][-1]) for r in fake_model.requests), \
        "the fixed brief is not the team's words: no constraints are pulled from it for later runs"
    # Shown by serve at once: the re-check's own progress message in the thread, one pinned report.
    assert len([m for m in bot_replies(fake_slack, thread) if "Done" in block_text(m)]) == 2
    assert [p.ts for p in fake_slack.pins(CHANNEL)] == [report_ts]

    # Checked again with the same fresh source: nothing changed since the re-check.
    say(stack, fake_slack, thread, "recheck in 1 second")
    unchanged = wait_for(lambda: [t for t in thread_texts(fake_slack, thread) if t.startswith("No changes")], 60,
                         "the no-change digest")[0]
    assert unchanged.startswith(f"No changes since {recheck.finished_at:%-d %b}:"), unchanged
    assert runs_of(redis_url, thread)[-1].sections[0].revisions == fees.revisions, "nothing revised"


def test_recheck_weekly_shows_the_next_check_and_recheck_off_cancels_it(stack, fake_slack, redis_url) -> None:
    thread, report_ts = researched_thread(stack, fake_slack)
    confirmation = say(stack, fake_slack, thread, "recheck weekly")
    due = utcnow() + timedelta(days=7)
    assert confirmation.startswith(f"Re-check scheduled: weekly; next check {due:%a %-d %b}"), confirmation
    wait_for(lambda: f"next check {due:%a %-d %b}" in report(fake_slack, report_ts), 10, "the footer's next check")
    assert len(scheduled_job_ids(redis_url)) == 1, "scheduled with RQ's scheduler"

    replaced = say(stack, fake_slack, thread, "recheck in 3 seconds")
    assert replaced.startswith("Re-check schedule replaced: once"), replaced
    assert len(scheduled_job_ids(redis_url)) == 1, "the weekly job was cancelled"
    assert say(stack, fake_slack, thread, "recheck").startswith("Re-checks: once, set by <@U0ANA>; next check ")

    assert say(stack, fake_slack, thread, "recheck off") == "Re-checks are off for this report (they were once)."
    assert scheduled_job_ids(redis_url) == []
    wait_for(lambda: "next check" not in report(fake_slack, report_ts), 10, "the footer to drop the next check")
    assert say(stack, fake_slack, thread, "recheck").startswith("No re-check is scheduled for this report.")
    # Past the cancelled check's time (RQ's scheduler looks every second), no re-check started.
    time.sleep(4)
    assert len(runs_of(redis_url, thread)) == 1
    assert not any(t.startswith(("Re-check:", "No changes")) for t in thread_texts(fake_slack, thread))


def test_a_weekly_recheck_runs_through_rqs_scheduler_and_plans_the_next_a_week_later(stack, fake_slack,
                                                                                     redis_url) -> None:
    thread, report_ts = researched_thread(stack, fake_slack)
    say(stack, fake_slack, thread, "recheck weekly")
    # The test plays the clock: the scheduled job is made due now, in RQ's own registry.
    redis = Redis.from_url(redis_url)
    registry = ScheduledJobRegistry(queue=Queue(keys.QUEUE, connection=redis))
    [job_id] = registry.get_job_ids()
    registry.schedule(Job.fetch(job_id, connection=redis), utcnow())
    unchanged = wait_for(lambda: [t for t in thread_texts(fake_slack, thread) if t.startswith("No changes")], 60,
                         "the digest")[0]
    due = utcnow() + timedelta(days=7)
    assert f"Next check {due:%a %-d %b}" in unchanged, unchanged
    assert len(runs_of(redis_url, thread)) == 2
    [next_job] = scheduled_job_ids(redis_url)
    assert next_job != job_id, "the next check is a new scheduled job"
    wait_for(lambda: f"next check {due:%a %-d %b}" in report(fake_slack, report_ts), 10, "the footer's next check")
    assert say(stack, fake_slack, thread, "recheck").startswith(f"Re-checks: weekly, set by <@U0ANA>; next check "
                                                                f"{due:%a %-d %b}")


def test_an_over_budget_recheck_says_so_in_the_thread_and_keeps_the_schedule(stack, fake_slack, redis_url) -> None:
    thread, report_ts = researched_thread(stack, fake_slack)
    Spend(Redis.from_url(redis_url)).set_budget(TEAM, "channel", 0.0, CHANNEL)  # an admin's $0/month
    say(stack, fake_slack, thread, "recheck in 1 second")
    skipped = wait_for(lambda: [t for t in thread_texts(fake_slack, thread) if t.startswith("Re-check skipped")], 30,
                       "the skip notice")[0]
    retry = utcnow() + timedelta(days=1)
    assert skipped.startswith(f"Re-check skipped: the channel's budget is reached; next check {retry:%a %-d %b}"), \
        skipped
    assert len(runs_of(redis_url, thread)) == 1, "no run started"
    assert say(stack, fake_slack, thread, "recheck").startswith("Re-checks: once, set by <@U0ANA>; next check ")
    assert len(scheduled_job_ids(redis_url)) == 1
    wait_for(lambda: "next check" in report(fake_slack, report_ts), 10, "the footer to show the retry")


def test_a_failed_recheck_says_so_in_the_thread_and_keeps_the_schedule(stack, fake_slack, fake_model,
                                                                        redis_url) -> None:
    thread, report_ts = researched_thread(stack, fake_slack)
    fake_model.fail_always(500)
    say(stack, fake_slack, thread, "recheck in 1 second")
    failed = wait_for(lambda: [t for t in thread_texts(fake_slack, thread) if t.startswith("Re-check did not")], 60,
                      "the failure notice")[0]
    retry = utcnow() + timedelta(days=1)
    assert "model service kept failing" in failed and f"next check {retry:%a %-d %b}" in failed, failed
    assert say(stack, fake_slack, thread, "recheck").startswith("Re-checks: once, set by <@U0ANA>; next check ")
    assert len(scheduled_job_ids(redis_url)) == 1
    wait_for(lambda: f"next check {retry:%a %-d %b}" in report(fake_slack, report_ts), 10, "the footer's retry")


def test_a_reply_that_merely_starts_with_recheck_continues_the_research(stack, fake_slack, fake_model) -> None:
    thread, _ = researched_thread(stack, fake_slack)
    asked = len(fake_model.requests)
    event = message_event("recheck the fee against the 2025 fact sheet", channel=CHANNEL, thread_ts=thread,
                          user="U0ANA")
    assert post_event(stack, event).status_code == 200
    wait_for(lambda: any("<follow_up>\nrecheck the fee" in _text(r["messages"][0])
                         for r in fake_model.requests[asked:]), 15, "a continuation with the reply as its request")


# --- the jobs API, driven directly (no worker: the test plays the scheduler) ------------------


def finished_thread(redis: Redis, sections: list[Section]) -> str:
    store = RunStore(redis)
    run = Run(team=TEAM, channel=CHANNEL, thread_ts="100.1", requester="U0ANA", question="What does VTI cost?")
    store.create(run, sections=sections)
    store.finish(run.id, RunStatus.completed, "")
    return run.id


def test_a_weekly_check_that_runs_plans_the_next_one_a_week_later_with_a_fresh_token(redis: Redis) -> None:
    first = finished_thread(redis, [Section(section_id="sec1", title="Fees", body="VTI costs 0.04%.")])
    rechecks = Rechecks(redis, budget_reached=lambda *_: None)
    schedule, replaced = rechecks.set(TEAM, CHANNEL, "100.1", seconds=WEEK_SECONDS, repeat=True, set_by="U0ANA")
    assert not replaced
    assert rechecks.start(TEAM, CHANNEL, "100.1", "not-the-token") == "replaced", "a stale job does nothing"
    outcome = rechecks.start(TEAM, CHANNEL, "100.1", schedule.token)
    assert outcome.startswith("started run ")
    after = rechecks.get(TEAM, CHANNEL, "100.1")
    assert after is not None and after.token != schedule.token and after.next_at is not None
    assert timedelta(days=6, hours=23) < after.next_at - utcnow() <= timedelta(days=7)
    store = RunStore(redis)
    run_id = store.thread_run_ids(TEAM, CHANNEL, "100.1")[-1]
    state = store.get(run_id)
    assert state.run.parent_run_id == first and state.next_check == after.next_at, "the footer shows the next one"
    assert state.run.recheck and state.run.follow_up and state.run.follow_up.startswith("Scheduled re-check")
    assert rechecks.start(TEAM, CHANNEL, "100.1", schedule.token) == "replaced", "the old token ran once"


def test_the_digest_pairs_old_and_new_figures_sentence_by_sentence() -> None:
    old = "VTI holds 3,600 stocks [s2]. VTI's expense ratio is 0.04% [s1]. Assets were $1.2 trillion in 2024 [s3]."
    new = "VTI holds 3,600 stocks [s2]. VTI's expense ratio is 0.03% [s5]. Assets were $1.4 trillion in 2025 [s6]."
    pairs = [(c.old, c.new, c.sources) for c in figure_changes(old, new)]
    assert pairs == [("0.04%", "0.03%", ["s5"]), ("$1.2 trillion", "$1.4 trillion", ["s6"]), ("2024", "2025", ["s6"])]


def test_a_recheck_that_failed_says_so_with_the_next_check() -> None:
    from jobs import RunState
    from jobs.upkeep.recheck import Schedule

    section = Section(section_id="sec1", title="Fees", body="VTI costs 0.04%.")
    parent = RunState(run=Run(question="q"), sections=[section], status=RunStatus.completed)
    failed = RunState(run=Run(question="q"), sections=[section.model_copy(update={"revisions": []})],
                      status=RunStatus.failed, reason="the model API kept failing")
    since = utcnow() - timedelta(days=7)
    recheck = RecheckRun(run_id="r2", parent_run_id="r1", channel=CHANNEL, thread_ts="1.1", since=since)
    nxt = utcnow() + timedelta(days=1)
    schedule = Schedule(channel=CHANNEL, thread_ts="1.1", delay_seconds=60, next_at=nxt, token="t", set_at=utcnow())
    text = digest(recheck, parent, failed, schedule)
    assert text == (f"Re-check did not finish: the model API kept failing. The report is as it was on "
                    f"{since:%-d %b}; next check {nxt:%a %-d %b, %H:%M} UTC.")
    revised = failed.model_copy(update={"status": RunStatus.completed, "sections": [
        Section(section_id="sec1", title="Fees", body="VTI costs 0.03%.", revisions=[Revision(body="x", reason="r")])]})
    assert "No changes" not in digest(recheck, parent, revised, None)


# What Slack would turn into a mention, a broadcast or an unsafe link (as in test_mrkdwn_properties.py).
ATOM = re.compile(r"<([^<>]*)>")
SAFE_TARGET = re.compile(r"https?://[^\s|<>]+", re.IGNORECASE)
BROADCAST = re.compile(r"(?<![\w.])@(?:channel|here|everyone)\b", re.IGNORECASE)
HOSTILE = st.sampled_from(["<!channel>", "<@U024BE7LH>", "@here", "<#C1|x>", "&", "|", ">", "`", "*", "0.04%",
                           "$1.2 billion", "[s1]", "[s2]", "2025", "\n", " "])
hostile_text = st.lists(st.one_of(HOSTILE, st.text(max_size=8)), max_size=12).map("".join)


def live_markup(mrkdwn: str) -> list[str]:
    problems = [m.group() for m in ATOM.finditer(mrkdwn) if not SAFE_TARGET.fullmatch(m.group(1).split("|", 1)[0])]
    rest = ATOM.sub(" ", mrkdwn)
    return problems + (["unclosed <"] if "<" in rest else []) + [m.group() for m in BROADCAST.finditer(rest)]


@settings(max_examples=150, deadline=None)
@given(title=hostile_text, old=hostile_text, new=hostile_text, reason=hostile_text, source_title=hostile_text,
       url=st.sampled_from(["https://x.test/a", "javascript:alert(1)", "<!here>", "https://x.test/a|b>c"]),
       status=st.sampled_from([RunStatus.completed, RunStatus.failed, RunStatus.stopped]), why=hostile_text)
@example(title="<!channel> Fees", old="0.04% [s1]", new="0.03% <@U1> [s2]", reason="@here cut", source_title="<!here>",
         url="https://x.test/a", status=RunStatus.completed, why="")
def test_a_digest_of_hostile_model_text_pings_no_one_and_links_only_to_web_pages(
        title: str, old: str, new: str, reason: str, source_title: str, url: str, status: RunStatus,
        why: str) -> None:
    from jobs import RunState

    sources = {m: Source(marker=m, url=url, title=source_title, passage="p") for m in ("s1", "s2")}
    parent = RunState(run=Run(question="q"), sections=[Section(section_id="sec1", title=title, body=old)],
                      sources=sources, status=RunStatus.completed)
    revised = Section(section_id="sec1", title=title, body=new, revisions=[Revision(body=old, reason=reason)])
    added = Section(section_id="sec2", title=title, body=new)
    state = RunState(run=Run(question="q"), sections=[revised, added], sources=sources, status=status, reason=why)
    recheck = RecheckRun(run_id="r2", parent_run_id="r1", channel=CHANNEL, thread_ts="1.1", since=utcnow())
    assert live_markup(digest(recheck, parent, state, None)) == []


@pytest.mark.parametrize(("text", "action", "seconds", "repeat"), [
    ("recheck", "show", 0, False),
    ("<@UBOT> recheck weekly", "set", WEEK_SECONDS, True),
    ("Re-check in 30 days.", "set", 30 * 86400, False),
    ("recheck every 2 weeks", "set", 2 * WEEK_SECONDS, True),
    ("recheck in 45 seconds", "set", 45, False),
    ("recheck off", "off", 0, False),
    ("recheck every 2 hours", "refused", 0, False),
    ("recheck in 100 days", "refused", 0, False),
])
def test_recheck_commands_parse(text: str, action: str, seconds: int, repeat: bool) -> None:
    command = parse_recheck(text)
    assert command is not None and (command.action, command.seconds, command.repeat) == (action, seconds, repeat)
    if action == "refused":
        assert "try `recheck" in command.problem, "a refusal says what to do instead"


def test_text_that_is_not_a_recheck_command_is_left_to_the_research() -> None:
    for text in ("recheck the fee against the 2025 fact sheet", "rechecking is great", "please recheck"):
        assert parse_recheck(text) is None, text
