"""Spend you can see and cap, end to end: real serve (Socket Mode) and worker processes, real
Redis, the real Slack and Anthropic clients talking to the fakes. Costs come from the fake
model's real token counts, priced as `deepthread inspect` prices them."""
from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from bot.cli.inspect import inspect
from jobs import RunStore
from jobs.budgets.spend import Spend
from tests.e2e.stack import block_text, socket_mode_stack
from tests.fakes.slack import TEAM_ID, FakeSlack, app_mention_event, message_event
from tests.fakes.slack_commands import command_response, send_slash_command
from tests.processes import Stack, wait_for

CHANNEL, OTHER = "C0TEST", "C0OTHER"
ANA, BEN, ADMIN = "U0ANA", "U0BEN", "U0ADMIN"
DOLLARS = re.compile(r"\$(\d[\d,]*\.\d\d)")


@pytest.fixture
def stack_env() -> dict[str, str]:
    return {}


@pytest.fixture
def stack(tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web,
          stack_env: dict[str, str]) -> Iterator[Stack]:
    with socket_mode_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url, web_url=fake_web.url,
                      **stack_env) as s:
        yield s


def deliver(slack: FakeSlack, envelope: dict) -> None:
    envelope_id = slack.send_socket_event(envelope)
    wait_for(lambda: envelope_id in slack.socket_acks, 3, "the ack")


def bot_replies(slack: FakeSlack, channel: str, thread_ts: str) -> list:
    return [m for m in slack.thread(channel, thread_ts) if m.ts != thread_ts]


def ask(slack: FakeSlack, question: str, *, channel: str = CHANNEL, user: str = ANA) -> str:
    envelope = app_mention_event(question, channel=channel, user=user)
    ts = slack.seed_event(envelope)
    deliver(slack, envelope)
    return ts


def finished_report(slack: FakeSlack, channel: str, thread_ts: str, timeout: float = 40) -> str:
    """The pinned report's text once the run has ended (final or not)."""
    replies = wait_for(lambda: len(bot_replies(slack, channel, thread_ts)) >= 2 and bot_replies(slack, channel,
                                                                                                 thread_ts),
                       15, "progress and report replies")
    report_ts = replies[1].ts
    wait_for(lambda: re.search(r"Final|Incomplete|Stopped", block_text(slack.message(channel, report_ts))),
             timeout, "the run to end")
    return report_ts


def recorded_runs(redis: Redis) -> dict[str, float]:
    """run id -> the cost jobs/budgets/spend.py recorded for it."""
    return {run.run_id: run.micros / 1e6 for run in Spend(redis).month(TEAM_ID).top_runs}


def no_budgets_set(redis: Redis) -> bool:
    """No admin budget for the channel or the workspace (what `budget` alone would show)."""
    return not any(cap.overridden for cap in Spend(redis).caps(TEAM_ID, CHANNEL))


def inspect_total(redis: Redis, run_id: str) -> float:
    out = io.StringIO()
    assert inspect(redis, run_id, None, out) == 0
    return float(re.search(r"est\. \$(\d+\.\d+) in all", out.getvalue()).group(1))


def test_usage_reply_adds_up_to_the_runs_recorded_costs(stack: Stack, fake_slack: FakeSlack, redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    threads = [(CHANNEL, ask(fake_slack, "expense ratio VTI SCHB ITOT", user=ANA)),
               (CHANNEL, ask(fake_slack, "expense ratio VTI", user=BEN)),
               (OTHER, ask(fake_slack, "expense ratio SCHB", channel=OTHER, user=ANA))]
    reports = [finished_report(fake_slack, channel, ts) for channel, ts in threads]
    costs = wait_for(lambda: len(recorded_runs(redis)) == 3 and recorded_runs(redis), 10, "three recorded runs")
    assert all(cost > 0 for cost in costs.values())

    # Each run's recorded cost is what `deepthread inspect` totals for it, and its footer shows it.
    for run_id, cost in costs.items():
        assert inspect_total(redis, run_id) == pytest.approx(cost, abs=0.005)
    footers = {channel: block_text(fake_slack.message(channel, ts))
               for (channel, _), ts in zip(threads, reports, strict=True)}
    for (channel, _), ts in zip(threads, reports, strict=True):
        wait_for(lambda c=channel, t=ts: "est. $" in block_text(fake_slack.message(c, t)), 10, "the footer's cost")
    shown = sorted(float(DOLLARS.search(block_text(fake_slack.message(c, t)).split("est. ")[1]).group(1))
                   for (c, _), t in zip(threads, reports, strict=True))
    assert shown == sorted(round(c, 2) for c in costs.values()), footers

    # `/deepthread usage` from an admin: answered in the ack, only to them, the whole workspace.
    fake_slack.add_user(ADMIN, name="alex", admin=True)
    fake_slack.add_user(ANA, name="ana")
    fake_slack.add_user(BEN, name="ben")
    envelope_id = send_slash_command(fake_slack, "usage", user=ADMIN, channel=CHANNEL)
    wait_for(lambda: envelope_id in fake_slack.socket_acks, 3, "the slash command's ack")
    answer = wait_for(lambda: command_response(fake_slack, envelope_id), 3, "the ack's reply")["text"]
    lines = {line.split(":*")[0].strip("*"): line for line in answer.splitlines() if ":*" in line}
    total = sum(costs.values())
    assert f"${total:,.2f} across 3 runs" in lines[next(k for k in lines if k.startswith("Spend in"))]
    per_channel = {m.group(1): float(m.group(2)) for m in re.finditer(r"<#(\w+)> \$(\d+\.\d\d)", lines["By channel"])}
    names = {"ana": ANA, "ben": BEN}
    per_person = {names[m.group(1)]: float(m.group(2))
                  for m in re.finditer(r"(ana|ben) \$(\d+\.\d\d)", lines["By person"])}
    assert "<@" not in answer, "people are named, not pinged"
    by = {run_id: Spend(redis).recorded(run_id).model_dump() for run_id in costs}
    for channel in (CHANNEL, OTHER):
        assert per_channel[channel] == pytest.approx(sum(c for r, c in costs.items() if by[r]["channel"] == channel),
                                                     abs=0.006)
    for user in (ANA, BEN):
        assert per_person[user] == pytest.approx(sum(c for r, c in costs.items() if by[r]["user"] == user), abs=0.006)
    assert sum(per_channel.values()) == pytest.approx(total, abs=0.011)
    # The most expensive runs, most expensive first, each linked to its thread (all public here).
    top = re.findall(r"^\d+\. \$(\d+\.\d\d) · <(https://[^|>]+)\|", answer, re.M)
    assert [float(c) for c, _ in top] == sorted((round(c, 2) for c in costs.values()), reverse=True)
    threads_linked = {url for _, url in top}
    assert threads_linked == {f"https://deepthread-test.slack.com/archives/{c}/p{ts.replace('.', '')}"
                              for c, ts in threads}

    # `usage` in one of the threads answers there with that channel's figures only.
    channel, thread_ts = threads[0]
    here = sum(c for r, c in costs.items() if by[r]["channel"] == channel)
    before = len(bot_replies(fake_slack, channel, thread_ts))
    deliver(fake_slack, message_event("usage", channel=channel, thread_ts=thread_ts, user=BEN))
    reply = wait_for(lambda: bot_replies(fake_slack, channel, thread_ts)[before:], 10, "the usage reply")[0]
    assert f"in <#{channel}>:* ${here:,.2f} across 2 runs" in reply.text
    assert "expense ratio SCHB" not in reply.text, "another channel's question is not shown here"
    assert len(recorded_runs(redis)) == 3, "a command starts no run"


def thread_runs(redis: Redis, channel: str, thread_ts: str) -> int:
    return len(RunStore(redis).thread_run_ids(TEAM_ID, channel, thread_ts))


@pytest.mark.parametrize("stack_env", [{"DEEPTHREAD_CHANNEL_BUDGET_USD": "0.01"}])
def test_a_run_crossing_the_channel_budget_finalizes_and_the_next_question_is_refused(
    stack: Stack, fake_slack: FakeSlack, redis_url: str
) -> None:
    redis = Redis.from_url(redis_url)
    first = ask(fake_slack, "expense ratio VTI SCHB ITOT")
    report_ts = finished_report(fake_slack, CHANNEL, first)
    # The run's cost budget was what the channel had left ($0.01): it stopped exploring and wrote
    # its answer through the ledger, which names the channel's budget, not a profile limit.
    report = block_text(fake_slack.message(CHANNEL, report_ts))
    assert "channel budget ($0.01/month)" in report, report
    assert "cost limit" not in report
    wait_for(lambda: recorded_runs(redis), 10, "the run recorded")
    spent = sum(recorded_runs(redis).values())
    assert spent >= 0.01, "the run crossed the budget (its last turn was already under way)"

    # Over the cap: a new question gets a clear reply, and nothing starts.
    pins_before = [p.ts for p in fake_slack.pins(CHANNEL)]
    second = ask(fake_slack, "expense ratio SCHB", user=BEN)
    refusal = wait_for(lambda: bot_replies(fake_slack, CHANNEL, second), 10, "the refusal")[0].text
    assert "This channel has used its monthly budget" in refusal and "started nothing" in refusal
    assert f"${spent:,.2f} of $0.01" in refusal
    assert "budget #channel" in refusal, "says how to raise it"
    # A reply in the finished thread would continue it: refused as well.
    replies_before = len(bot_replies(fake_slack, CHANNEL, first))
    deliver(fake_slack, message_event("now compare SCHB too", channel=CHANNEL, thread_ts=first, user=ANA))
    again = wait_for(lambda: bot_replies(fake_slack, CHANNEL, first)[replies_before:], 10, "the second refusal")
    assert "started nothing" in again[0].text
    time.sleep(1.0)
    assert [p.ts for p in fake_slack.pins(CHANNEL)] == pins_before
    assert thread_runs(redis, CHANNEL, second) == 0 and thread_runs(redis, CHANNEL, first) == 1
    assert len(bot_replies(fake_slack, CHANNEL, second)) == 1
    assert len(recorded_runs(redis)) == 1


def dm(slack: FakeSlack, text: str, user: str) -> str:
    """A direct message to the bot; returns the bot's reply."""
    channel = f"D{user[1:]}"
    envelope = message_event(text, channel=channel, user=user, channel_type="im")
    ts = envelope["event"]["ts"]
    slack.seed_event(envelope)
    deliver(slack, envelope)
    return wait_for(lambda: bot_replies(slack, channel, ts), 10, f"the reply to {text!r}")[0].text


def test_only_admins_set_budgets_and_a_malformed_one_says_how_to_write_it(
    stack: Stack, fake_slack: FakeSlack, redis_url: str
) -> None:
    redis = Redis.from_url(redis_url)
    fake_slack.admins.add(ADMIN)  # users.info says so
    target = f"<#{CHANNEL}|general>"

    refused = dm(fake_slack, f"budget {target} $0/month", BEN)
    assert "Only workspace admins can set budgets" in refused and "nothing changed" in refused
    assert no_budgets_set(redis)

    for malformed, advice in [(f"budget {target} fifty dollars", "could not read"),
                              (f"budget {target} $50/week", "Budgets are monthly"),
                              ("budget #general $50/month", "Pick it from Slack's autocomplete"),
                              (f"budget {target}", "Give the monthly amount")]:
        answer = dm(fake_slack, malformed, ADMIN)
        assert advice in answer and "`budget #channel $50/month`" in answer, answer
    assert no_budgets_set(redis)

    assert "Budget set: <#C0TEST> may spend $0.00 a month" in dm(fake_slack, f"budget {target} $0/month", ADMIN)
    question = ask(fake_slack, "expense ratio VTI")
    refusal = wait_for(lambda: bot_replies(fake_slack, CHANNEL, question), 10, "the refusal")[0].text
    assert "This channel has used its monthly budget: $0.00 of $0.00" in refusal
    assert thread_runs(redis, CHANNEL, question) == 0

    # The slash command takes the same command; lifting the budget lets questions start again.
    envelope_id = send_slash_command(fake_slack, f"budget {target} off", user=ADMIN)
    lifted = wait_for(lambda: command_response(fake_slack, envelope_id), 3, "the slash command's reply")
    assert lifted["text"] == "Budget lifted: <#C0TEST> has no monthly cap now."
    started = ask(fake_slack, "expense ratio VTI")
    finished_report(fake_slack, CHANNEL, started)
    assert thread_runs(redis, CHANNEL, started) == 1
