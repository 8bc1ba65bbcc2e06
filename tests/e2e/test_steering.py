"""The team steers a real run in Slack: stop by reaction, "go deeper", notes, continuations,
and a worker killed mid-run. Real serve and worker processes, real Redis, fake Slack/model/web."""
from __future__ import annotations

import json
import re

from tests.e2e.stack import CHANNEL, block_text, bot_replies, main_requests, post_event, start
from tests.e2e.stack import report_text as report
from tests.fakes.policies import SteadyPolicy, is_extraction, slow_page
from tests.fakes.slack import app_mention_event, message_event, reaction_added_event
from tests.processes import (
    Stack,
    children,
    deepthread_stack,
    environment,
    free_port,
    kill_tree,
    running,
    wait_for,
    wait_listening,
)


def test_stop_reaction_by_the_requester_stops_the_run_and_keeps_sections(stack, fake_slack, fake_model, fake_web) -> None:
    fake_web.slow_seconds = 40
    fake_model.policy = SteadyPolicy(turns=50, slow_url=slow_page(fake_web))
    thread, progress, report_ts = start(stack, fake_slack)
    wait_for(lambda: "Fees" in report(fake_slack, report_ts), 15, "the first section")
    reaction = reaction_added_event("octagonal_sign", user="U0ANA", item_channel=CHANNEL, item_ts=report_ts)
    assert post_event(stack, reaction).status_code == 200
    wait_for(lambda: "Stopped" in block_text(fake_slack.message(CHANNEL, progress)), 10, "the stop")
    assert fake_web.slow_served == 0, "stopped during the 40 s page, not after it"
    text = wait_for(lambda: "Stopped by" in report(fake_slack, report_ts) and report(fake_slack, report_ts),
                    5, "the report to say who stopped it")
    assert re.search(r"Stopped by (<@|&lt;@)U0ANA", text) and "Fees" in text, text


def test_stop_reaction_by_a_stranger_is_refused_privately(stack, fake_slack, fake_model) -> None:
    fake_model.delay = 0.2
    fake_model.policy = SteadyPolicy(turns=25)
    thread, progress, report_ts = start(stack, fake_slack)
    reaction = reaction_added_event("octagonal_sign", user="U0STRANGER", item_channel=CHANNEL, item_ts=progress)
    assert post_event(stack, reaction).status_code == 200
    note = wait_for(lambda: fake_slack.ephemerals(CHANNEL), 10, "the private answer")
    assert "Only <@U0ANA> (who asked) or a workspace admin can stop this run." in note[0].text
    wait_for(lambda: "Done" in block_text(fake_slack.message(CHANNEL, progress)), 30, "the run to finish anyway")


def test_go_deeper_upgrades_once_and_the_next_budget_block_shows_it(stack, fake_slack, fake_model) -> None:
    fake_model.delay = 0.2
    fake_model.policy = SteadyPolicy(turns=30)
    thread, progress, report_ts = start(stack, fake_slack)
    wait_for(lambda: len(main_requests(fake_model)) >= 3, 15, "a few turns")
    reply = message_event("go deeper", channel=CHANNEL, thread_ts=thread, user="U0ANA")
    assert post_event(stack, reply).status_code == 200
    assert post_event(stack, reply, headers={"X-Slack-Retry-Num": "1"}).status_code == 200  # Slack's retry
    wait_for(lambda: any("Profile: deep (budget revision 2)" in json.dumps(r["messages"][-1])
                         for r in main_requests(fake_model)), 15, "the upgraded budget block")
    blocks = [json.dumps(r["messages"][-1]) for r in main_requests(fake_model)]
    assert not any("revision 3" in b for b in blocks), "a retried event upgrades once"
    acks = [m for m in fake_slack.thread(CHANNEL, thread) if m.text.startswith("Going deeper")]
    assert len(acks) == 1


def test_a_reply_during_the_run_reaches_the_next_turn_as_a_note(stack, fake_slack, fake_model) -> None:
    fake_model.delay = 0.2
    fake_model.policy = SteadyPolicy(turns=30)
    thread, progress, report_ts = start(stack, fake_slack)
    wait_for(lambda: len(main_requests(fake_model)) >= 2, 15, "a turn or two")
    reply = message_event("Only sources after 2020, please", channel=CHANNEL, thread_ts=thread, user="U0BEN")
    reply_ts = fake_slack.seed_event(reply)
    assert post_event(stack, reply).status_code == 200
    wait_for(lambda: any('Only sources after 2020, please' in json.dumps(r["messages"][-1])
                         for r in main_requests(fake_model)), 15, "the note in a request")
    assert "memo" in fake_slack.message(CHANNEL, reply_ts).reactions, "acknowledged in the thread"


def test_a_reply_after_the_end_continues_the_research_in_the_same_report(tmp_path, redis_url, fake_slack, fake_model,
                                                                          fake_web) -> None:
    # A small context budget, so the first run compacts and leaves a summary to hand on.
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_CONTEXT_TOKENS="6000") as stack:
        fake_model.delay = 0.15
        fake_model.policy = SteadyPolicy(turns=14)
        thread, progress, report_ts = start(stack, fake_slack, "expense ratio VTI SCHB ITOT")
        wait_for(lambda: len(main_requests(fake_model)) >= 2, 15, "the first turns")
        note = message_event("Only sources after 2020", channel=CHANNEL, thread_ts=thread, user="U0BEN")
        assert post_event(stack, note).status_code == 200
        wait_for(lambda: "Final" in report(fake_slack, report_ts), 40, "the first run to end")
        assert any("Pause the research" in json.dumps(r["messages"][-1]) for r in fake_model.requests), \
            "the first run compacted"
        first_run_requests = len(main_requests(fake_model))
        fake_model.policy = SteadyPolicy(turns=3)
        reply = message_event("Now add ITOT's tracking difference", channel=CHANNEL, thread_ts=thread, user="U0ANA")
        assert post_event(stack, reply).status_code == 200
        wait_for(lambda: len(main_requests(fake_model)) > first_run_requests, 15, "the continuation's first request")
        opening = main_requests(fake_model)[first_run_requests]["messages"][0]["content"][0]["text"]
        # The five things a continuation carries, checked where they must arrive: its first request.
        assert opening.startswith("<task>\nexpense ratio VTI SCHB ITOT\n</task>"), "1. the original question"
        assert "- <@U0BEN>: Only sources after 2020" in opening, "2. the constraints and the user's notes"
        assert re.search(r'- sec1 "Fees": VTI charges the lowest fee \[s\d+\]', opening), \
            "3. the parent's sections, as an outline (open_section opens one)"
        assert re.search(r"passages are registered, \[s1\]–\[s\d+\]", opening), \
            "4. the citation registry, markers unchanged (named in the source index, every one citable)"
        assert re.search(r"^- \[s1\] .+ · 127\.0\.0\.1 · \d{4}-\d\d-\d\d · “", opening, re.M), "the sources, named"
        assert re.search(r"What the thread has established.*\n- In short: the sources agree .*\[s\d+\]", opening), \
            "5. the rolling thread summary (the parent's cited findings; compaction facts: test_thread_memory.py)"
        assert "<follow_up>\nNow add ITOT's tracking difference\n</follow_up>" in opening, "and the new request"
        wait_for(lambda: len([m for m in bot_replies(fake_slack, thread) if "Done" in block_text(m)]) == 2, 30,
                 "the continuation to finish")
        assert [p.ts for p in fake_slack.pins(CHANNEL)] == [report_ts], "one pinned report, edited in place"
        assert "Fees" in report(fake_slack, report_ts)


def test_a_killed_worker_is_replaced_and_the_run_resumes_from_its_checkpoint(tmp_path, redis_url, fake_slack,
                                                                             fake_model, fake_web) -> None:
    fake_model.delay = 0.15
    policy = SteadyPolicy(turns=24)
    fake_model.policy = policy
    port = free_port()
    env = environment(
        SLACK_BOT_TOKEN="xoxb-test", SLACK_SIGNING_SECRET="test-signing-secret", SLACK_API_URL=f"{fake_slack.url}/api/",
        ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=fake_model.url, REDIS_URL=redis_url, DEEPTHREAD_SEARCH="searxng",
        SEARXNG_URL=fake_web.url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1", PORT=str(port), DEEPTHREAD_RUN_LOCK_SECONDS="2",
    )
    with running(["serve"], env, tmp_path / "serve.log") as serve, \
            running(["worker"], env, tmp_path / "worker1.log", new_session=True) as worker:
        base = wait_listening(port, serve, tmp_path / "serve.log")
        stack = Stack(events_url=f"{base}/slack/events", env=env, logs=tmp_path)
        thread, progress, report_ts = start(stack, fake_slack)
        wait_for(lambda: "Fees" in report(fake_slack, report_ts) and policy.turn >= 8, 20, "a section and some turns")
        # The worker and its work-horse (RQ puts it in a process group of its own) die at once,
        # like a lost machine.
        assert children(worker.pid), "the work-horse is running the job"
        kill_tree(worker)
        turn_at_kill = policy.turn
        requests_at_kill = len(main_requests(fake_model))
        with running(["worker"], env, tmp_path / "worker2.log", new_session=True):
            wait_for(lambda: "Final" in report(fake_slack, report_ts), 60, "the resumed run to finish")
        text = report(fake_slack, report_ts)
        assert "Fees" in text and "VTI charges the lowest fee" in text, "earlier sections survived"
        assert policy.turn <= 24 + 1, "the run did not start over"
        first_after = main_requests(fake_model)[requests_at_kill]
        assert len(first_after["messages"]) >= 2 * (turn_at_kill - 2), "the fresh worker continued the same history"
        assert first_after["messages"][0] == main_requests(fake_model)[0]["messages"][0], "the same pinned task"
        # Whoever swept first (serve, or the fresh worker) queued it again.
        assert any("queued again to resume from its checkpoint" in (tmp_path / log).read_text()
                   for log in ("serve.log", "worker2.log"))


def test_a_direct_message_is_a_question_and_history_shows_revisions(stack, fake_slack, fake_model) -> None:
    from tests.fakes.anthropic import text_reply, tool_reply
    from tests.fakes.policies import extract

    write = ("write_section", {"title": "Fees", "body": "VTI costs 0.04% [s1]."})
    revise = ("revise_section", {"section_id": "sec1", "body": "VTI costs 0.03% [s1].", "reason": "the 2024 fact sheet"})
    # The snippet states no figure: the figure check refuses each write once, and saves it
    # (the figure marked for the reader) when it is sent again unchanged.
    calls = iter([tool_reply(call) for call in
                  [("web_search", {"query": "vti expense ratio"}), write, write, revise, revise]])
    fake_model.policy = lambda request: (extract(request) if is_extraction(request)  # the constraints pass
                                         else next(calls, text_reply("VTI costs 0.03% [s1].")))
    dm = message_event("What does VTI cost?", channel="D0ANA", user="U0ANA", channel_type="im")
    ts = fake_slack.seed_event(dm)
    assert post_event(stack, dm).status_code == 200
    replies = wait_for(lambda: len([m for m in fake_slack.thread("D0ANA", ts) if m.ts != ts]) >= 2
                       and [m for m in fake_slack.thread("D0ANA", ts) if m.ts != ts], 10, "the run's messages")
    wait_for(lambda: "Final" in block_text(fake_slack.message("D0ANA", replies[1].ts)), 30, "the final report")
    assert "revised ×1" in block_text(fake_slack.message("D0ANA", replies[1].ts))
    ask = message_event("history sec1", channel="D0ANA", user="U0ANA", thread_ts=ts, channel_type="im")
    assert post_event(stack, ask).status_code == 200
    answer = wait_for(lambda: [m for m in fake_slack.thread("D0ANA", ts) if "replaced because" in m.text], 10,
                      "the history reply")
    assert "version 1, replaced because: the 2024 fact sheet" in answer[0].text and "0.04%" in answer[0].text


def test_channel_allowlist_refuses_other_channels_but_not_dms(tmp_path, redis_url, fake_slack, fake_model, fake_web) -> None:
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_CHANNELS="C0RESEARCH") as stack:
        envelope = app_mention_event("expense ratio VTI", channel=CHANNEL)
        ts = fake_slack.seed_event(envelope)
        assert post_event(stack, envelope).status_code == 200
        reply = wait_for(lambda: bot_replies(fake_slack, ts), 10, "the refusal")
        assert "not enabled in this channel" in reply[0].text
        assert fake_slack.pins(CHANNEL) == []
