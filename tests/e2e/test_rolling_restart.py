"""A rolling restart of every process while runs research: two serve replicas and two workers, real
processes on loopback. Each process in turn is replaced as a deploy replaces it (its successor
started, then SIGTERM); a worker hands its run back to the front of the queue, a serve replica lets
its handlers finish and stops publishing. Every process exits on its own within the platform's grace,
and every run ends with all its sections and sources, in one progress message and one pinned report."""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from redis import Redis

from jobs import RunStatus, RunStore
from tests.e2e.stack import CHANNEL, block_text, bot_replies, fleet, post_event, stack_environment
from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply, tool_reply
from tests.fakes.policies import MARKER, ResearchPolicy, extract, is_extraction, is_summary_request, summary_reply
from tests.fakes.slack import FakeSlack, app_mention_event
from tests.processes import wait_for
from tests.fakes.slack_records import TEAM_ID

QUESTIONS = ["expense ratio VTI", "tracking error ITOT"]  # one run for each worker
SECTION_TURNS = (2, 5, 9, 14)
GRACE_SECONDS = 30


class ResearchUntilTold:
    """Every run searches, writing a section at each of SECTION_TURNS, until `finish` is set; then the
    next turn of each answers. Decided from each request's own history, so a resumed run goes on
    where its checkpoint left it."""

    def __init__(self) -> None:
        self.finish = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        if is_summary_request(request):
            return summary_reply(request)
        if not request.get("tools"):
            return text_reply('{"constraints": []}')
        messages = request["messages"]
        turn = 1 + sum(1 for m in messages if m["role"] == "assistant")
        if self.finish.is_set() or (request.get("tool_choice") or {}).get("type") == "none":
            return ResearchPolicy().final(messages)
        seen = MARKER.findall(json.dumps(messages))
        if turn in SECTION_TURNS and seen:
            return tool_reply(("write_section", {"title": f"Finding {turn}", "body": f"Found at turn {turn} {seen[-1]}."}))
        return tool_reply(("web_search", {"query": f"expense ratio angle {turn}"}))


def test_a_rolling_restart_of_every_process_during_runs_loses_nothing(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.delay = 2.5  # slow turns: 80 requests (the standard budget) outlast the whole restart
    policy = ResearchUntilTold()
    fake_model.policy = policy
    env = stack_environment(redis_url, fake_slack, fake_model, fake_web)
    store = RunStore(Redis.from_url(redis_url))
    with fleet(tmp_path, env, serves=2, workers=2) as running:
        threads = []
        for n, question in enumerate(QUESTIONS):
            envelope = app_mention_event(question, channel=CHANNEL)
            threads.append(fake_slack.seed_event(envelope))
            assert post_event(running.serves[n % 2][1], envelope).status_code == 200
        wait_for(lambda: all(len(bot_replies(fake_slack, t)) == 2 for t in threads), 30, "every run's messages")
        run_ids = [store.thread_run_ids(TEAM_ID, CHANNEL, t)[0] for t in threads]
        wait_for(lambda: all(s.sections for s in map(store.get, run_ids)), 60, "both runs at work, a section each")

        exits = []
        for old, _ in list(running.serves):  # each replaced: its successor up first, then SIGTERM
            running.add_serve()
            exits.append(("serve", *running.terminate(old, GRACE_SECONDS)))
        for old in list(running.workers):
            running.add_worker()
            exits.append(("worker", *running.terminate(old, GRACE_SECONDS)))
        assert not any(store.get(r).status.finished for r in run_ids), "the restart happened mid-run"
        policy.finish.set()

        def ended(thread: str) -> bool:
            replies = bot_replies(fake_slack, thread)
            return len(replies) == 2 and "Final" in block_text(fake_slack.message(CHANNEL, replies[1].ts)) \
                and "Done" in block_text(fake_slack.message(CHANNEL, replies[0].ts))

        wait_for(lambda: all(ended(t) for t in threads), 180, "every run to end after the restart")

        for kind, code, took in exits:
            assert code == 0 and took < GRACE_SECONDS, f"{kind} exited with {code} after {took:.1f} s"
        assert "handed back at shutdown" in running.logs_of("worker"), "a worker handed its run back"
        for question, thread, run_id in zip(QUESTIONS, threads, run_ids, strict=True):
            state = store.get(run_id)
            assert state.status == RunStatus.completed and not state.reason, state.reason
            titles = [s.title for s in state.sections]
            assert titles == [f"Finding {t}" for t in SECTION_TURNS if f"Finding {t}" in titles], titles
            assert "Finding 2" in titles and len(titles) == len(set(titles)), f"each section once: {titles}"
            report = block_text(fake_slack.message(CHANNEL, state.run.report_message or ""))
            assert all(title in report for title in titles), "every section is in the pinned report"
            assert [p.ts for p in fake_slack.pins(CHANNEL)].count(state.run.report_message) == 1
            assert len(bot_replies(fake_slack, thread)) == 2, "one progress message and one report"
            own = [r for r in fake_model.requests if r.get("tools")
                   and f"<task>\n{question}\n</task>" in r["messages"][0]["content"][0]["text"]]
            seen = {m.strip("[]") for r in own for m in MARKER.findall(json.dumps(r["messages"]))}
            assert seen and seen <= set(state.sources), f"sources the model saw, lost: {sorted(seen - set(state.sources))}"
