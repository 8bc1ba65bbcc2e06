"""The claim check as deployed (DEEPTHREAD_CLAIM_CHECK=on), end to end: real serve and worker
processes, real Redis, the real Slack and Anthropic clients against the fakes. The scripted model
reads the fund-fees page and the ocean-heat page, then writes a section with one sentence each page
supports and one that cites the ocean page for a claim about funds."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis import Redis

from jobs import RunState, RunStore
from tests.e2e.stack import CHANNEL, bot_replies, post_event, report_text, start
from tests.fakes.anthropic import Reply, text_reply, tool_reply
from tests.fakes.policies import (
    URL,
    _text,
    calls_made,
    extract,
    is_claim_check,
    is_extraction,
    result_text,
    results_of,
)
from tests.fakes.slack import FakeSlack, app_mention_event, message_event
from tests.processes import Stack, deepthread_stack, wait_for

SUPPORTED = "VTI has an expense ratio of 0.03%"
OFF_TOPIC = "ITOT is the cheapest of the three funds"


def _markers_by_page(request: dict[str, Any]) -> dict[str, list[str]]:
    """Each read page's excerpt markers, by the page's file name."""
    found: dict[str, list[str]] = {}
    for call, block in results_of(request, "read_page"):
        page = call["url"].rsplit("/", 1)[-1]
        found[page] = re.findall(r'^(\[s\d+\]) "', result_text(block), re.M)
    return found


class OffTopicCitationPolicy:
    """search → read both pages → write_section (one sentence supported by the fees page, one citing the
    ocean page for a claim about funds) → if refused, the same section again, unchanged → answer.
    `judge` answers the claim check's requests (the scripted judge: "supported" for every claim)."""

    def __init__(self, judge: Any = None) -> None:
        self.judge = judge or extract
        self.refusals: list[str] = []  # what write_section answered when it did not save

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_claim_check(request):
            return self.judge(request)
        if is_extraction(request):
            return extract(request)
        if not request.get("tools"):
            return text_reply('{"constraints": []}')
        done = [c["name"] for c in calls_made(request)]
        forced = (request.get("tool_choice") or {}).get("type") == "none"
        if not done:
            return tool_reply(("web_search", {"query": "expense ratio VTI ocean heat"}))
        if done == ["web_search"]:
            urls = [u for u in URL.findall(_text(request["messages"][-1])) if "etf-fees" in u or "ocean-heat" in u]
            goals = {"etf-fees": "VTI expense ratio", "ocean-heat": "ocean heat stored"}
            return tool_reply(*[("read_page", {"url": u, "goal": next(g for k, g in goals.items() if k in u)})
                                for u in urls])
        pages = _markers_by_page(request)
        last = _text(request["messages"][-1])
        writes = done.count("write_section")
        if not forced and (writes == 0 or (writes == 1 and "Not saved" in last)):
            if writes == 1:
                self.refusals.append(last)
            fees, ocean = pages["etf-fees.html"][0], pages["ocean-heat.html"][0]
            body = f"- {SUPPORTED} {fees}.\n- {OFF_TOPIC} {ocean}."
            return tool_reply(("write_section", {"title": "Fees", "body": body}))
        return text_reply("<summary>In short: VTI is cheap.</summary>")


def malformed_judge(request: dict[str, Any]) -> Reply:
    return text_reply("I looked at these claims and they seem mostly fine to me.")


@pytest.fixture
def checked_stack(tmp_path: Path, redis_url: str, fake_slack, fake_model, fake_web) -> Iterator[Stack]:
    """serve and a worker with the claim check on, as deployed by default."""
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_CLAIM_CHECK="on") as s:
        yield s


def _state(report: str, redis_url: str) -> RunState:
    run_id = re.search(r"run ([0-9a-f]{12})", report)
    assert run_id, report
    return RunStore(Redis.from_url(redis_url)).get(run_id.group(1))


def _ask(stack: Stack, slack: FakeSlack, thread: str, text: str) -> str:
    before = len(bot_replies(slack, thread))
    assert post_event(stack, message_event(text, channel=CHANNEL, thread_ts=thread, user="U0BEN")).status_code == 200
    replies = wait_for(lambda: len(bot_replies(slack, thread)) > before and bot_replies(slack, thread), 15,
                       f"the answer to {text!r}")
    return replies[-1].text


def test_a_sentence_citing_a_page_about_something_else_is_sent_back_then_kept_marked(
        checked_stack: Stack, fake_slack: FakeSlack, fake_model, redis_url: str) -> None:
    policy = OffTopicCitationPolicy()
    fake_model.policy = policy
    thread, _, report_ts = start(checked_stack, fake_slack)
    report = wait_for(lambda: "Final" in report_text(fake_slack, report_ts) and report_text(fake_slack, report_ts),
                      60, "the final report")

    # Returned to the agent the first time, with what the cited page says instead and what to do.
    [refusal] = policy.refusals
    assert "Not saved: 1 cited claim(s) are not supported" in refusal, refusal
    assert OFF_TOPIC in refusal and SUPPORTED not in refusal
    assert "cite a passage that states it" in refusal and "drop the claim" in refusal

    # Sent again unchanged: saved, the claim marked ⚠ in the text and in its footnote, counted in the footer.
    off_topic_line = next(line for line in report.splitlines() if OFF_TOPIC in line)
    supported_line = next(line for line in report.splitlines() if SUPPORTED in line)
    assert "⚠" in off_topic_line, report
    assert "⚠" not in supported_line, "a supported sentence stays plain"
    assert "2 cited claims checked against their sources · 1 not supported" in report, report
    ocean = re.search(r"^\[(\d+)\] .*ocean.*$", report, re.M | re.I)
    assert ocean and f"⚠ not found in [{ocean.group(1)}]" in ocean.group(0), report

    # Run state keeps each claim's verdict and anchor (offsets in the section body and in the source).
    [section] = _state(report, redis_url).sections
    kept, marked = sorted(section.claims, key=lambda c: c.start)
    assert (kept.verdict, kept.by, kept.marked) == ("supported", "judge", False)
    assert kept.anchor is not None and SUPPORTED in kept.anchor.quote and kept.anchor.score > 0.5
    assert (marked.verdict, marked.by, marked.marked) == ("unsupported", "rules", True)
    assert re.fullmatch(rf"- {OFF_TOPIC} \[s\d+\]\.", section.body[marked.start : marked.end])

    # `source N` for the fees page shows the anchor: the page's sentence the supported claim was checked against.
    fees = re.search(r"^\[(\d+)\] .*etf-fees.*$", report, re.M)
    assert fees, report
    answer = _ask(checked_stack, fake_slack, thread, f"source {fees.group(1)}")
    assert "*What the report cites it for*" in answer, answer
    assert SUPPORTED in answer and "_supported_" in answer
    assert re.search(r"^> .*VTI has an expense ratio of 0\.03%", answer, re.M), "the anchor quote, as a quote"


def test_a_malformed_judge_answer_leaves_the_claim_unchecked_never_supported(
        checked_stack: Stack, fake_slack: FakeSlack, fake_model, redis_url: str) -> None:
    policy = OffTopicCitationPolicy(judge=malformed_judge)
    fake_model.policy = policy
    _, _, report_ts = start(checked_stack, fake_slack)
    report = wait_for(lambda: "Final" in report_text(fake_slack, report_ts) and report_text(fake_slack, report_ts),
                      60, "the final report")
    assert any(is_claim_check(r) for r in fake_model.requests), "the judge was asked"
    # The off-topic sentence is the rules' (no model call); the supported one was the judge's, which answered prose.
    assert "2 cited claims checked against their sources · 1 not supported · 1 unchecked" in report, report
    supported_line = next(line for line in report.splitlines() if SUPPORTED in line)
    assert "⚠" not in supported_line
    [section] = _state(report, redis_url).sections
    verdicts = sorted((c.verdict, c.by) for c in section.claims)
    assert verdicts == [("unchecked", "none"), ("unsupported", "rules")], verdicts


def test_an_admin_turns_the_check_off_for_the_workspace_and_the_next_run_is_not_checked(
        checked_stack: Stack, fake_slack: FakeSlack, fake_model, redis_url: str) -> None:
    fake_model.policy = OffTopicCitationPolicy()
    fake_slack.add_user("U0ADM", admin=True)
    command = app_mention_event("claim check off", channel=CHANNEL, user="U0ADM")
    ts = fake_slack.seed_event(command)
    assert post_event(checked_stack, command).status_code == 200
    [answer] = wait_for(lambda: bot_replies(fake_slack, ts), 10, "the answer")
    assert "The claim check is off in this workspace" in answer.text
    assert [m for m in bot_replies(fake_slack, ts) if "Researching" in (m.text or "")] == [], "a command, no run"

    _, _, report_ts = start(checked_stack, fake_slack)
    report = wait_for(lambda: "Final" in report_text(fake_slack, report_ts) and report_text(fake_slack, report_ts),
                      60, "the final report")
    assert not any(is_claim_check(r) for r in fake_model.requests), "no judge request"
    assert "cited claims checked" not in report and OFF_TOPIC in report and "⚠" not in report
    [section] = _state(report, redis_url).sections
    assert section.claims == []
