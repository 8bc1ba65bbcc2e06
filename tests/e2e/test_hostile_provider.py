"""One provider's hostile answers to one workspace hold no other workspace back, end to end: two
workspaces installed through OAuth, one real serve, one real worker carrying their runs side by side
(DEEPTHREAD_WORKER_RUNS), the shared Redis limiter, and the fake model answering every request of
workspace A's runs 429 with a retry-after of a billion seconds or a requests-reset dated 2999.
While those answers keep coming, workspace B's run finishes at the pace the same run had alone, earlier
in the same test; A's runs end, each request within its model patience, with a reason that says the
service kept refusing them."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis import Redis

from jobs import RunStore
from tests.e2e.stack import block_text, install, post_event, workspaces_stack
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import SteadyPolicy
from tests.fakes.slack import FakeSlack, FakeWorkspace, app_mention_event
from tests.processes import Stack, wait_for

ALPHA, BETA = "T0ALPHA", "T0BETA"  # A: answered with hostile headers; B: answered as usual
CHANNELS = {ALPHA: "C0ALPHA", BETA: "C0BETA"}
MARK = "ZQXF"  # in A's questions only: how the fake model tells A's requests from B's
HOSTILE = [{"retry-after": "1000000000"}, {"anthropic-ratelimit-requests-reset": "2999-01-01T00:00:00Z"}]
RUNS_OF_A = 3
PATIENCE_SECONDS = 5  # DEEPTHREAD_MODEL_PATIENCE_SECONDS: what one request of A may wait in all
B_TURNS = 20  # B's run: long enough for A's runs to ask again (after their cut pause) while it works
ANSWER_SECONDS = 0.3  # every answer takes this long, as a model's does


@pytest.fixture
def workspaces(fake_slack: FakeSlack) -> dict[str, FakeWorkspace]:
    return {
        team: fake_slack.add_workspace(team, name=f"Team {team[2:].title()}", channels=(channel,))
        for team, channel in CHANNELS.items()
    }


@pytest.fixture
def stack(
    tmp_path: Path,
    redis_url: str,
    fake_slack: FakeSlack,
    fake_model: FakeAnthropic,
    fake_web,
    workspaces: dict[str, FakeWorkspace],
) -> Iterator[tuple[str, Stack]]:
    with workspaces_stack(
        tmp_path,
        fake_slack,
        redis_url=redis_url,
        model_url=fake_model.url,
        web_url=fake_web.url,
        DEEPTHREAD_WORKER_RUNS=str(RUNS_OF_A + 1),
        DEEPTHREAD_MODEL_PATIENCE_SECONDS=str(PATIENCE_SECONDS),
    ) as s:
        yield s


def bot_replies(slack: FakeSlack, channel: str, thread_ts: str) -> list:
    return [m for m in slack.thread(channel, thread_ts) if m.ts != thread_ts and m.bot_id]


def ask(stack: Stack, slack: FakeSlack, workspace: FakeWorkspace, question: str) -> str:
    envelope = app_mention_event(
        question, channel=CHANNELS[workspace.team_id], team_id=workspace.team_id, bot_user_id=workspace.bot_user_id
    )
    thread_ts = slack.seed_event(envelope)
    assert post_event(stack, envelope).status_code == 200
    return thread_ts


def ended(slack: FakeSlack, channel: str, thread_ts: str, timeout: float) -> str:
    """The report's text once its run has ended (final or not)."""
    replies = wait_for(
        lambda: len(bot_replies(slack, channel, thread_ts)) >= 2 and bot_replies(slack, channel, thread_ts),
        30,
        "progress and report replies",
    )
    report = replies[1].ts
    return wait_for(
        lambda: re.search(r"Final|Stopped|Incomplete", text := block_text(slack.message(channel, report))) and text,
        timeout,
        "the run to end",
    )


def test_hostile_answers_to_one_workspace_leave_another_its_pace_and_end_their_runs(
    stack: tuple[str, Stack],
    fake_slack: FakeSlack,
    fake_model: FakeAnthropic,
    redis_url: str,
    workspaces: dict[str, FakeWorkspace],
) -> None:
    base, s = stack
    for team in CHANNELS:
        assert install(base, team).status_code == 200
    hostile_at: list[float] = []  # when each of A's requests was answered with hostile headers

    def answer_with(body: dict[str, Any]) -> tuple[int, dict[str, str]] | None:
        if MARK not in json.dumps(body.get("messages")):
            return None
        hostile_at.append(time.monotonic())
        return 429, HOSTILE[len(hostile_at) % len(HOSTILE)]

    fake_model.answer_with = answer_with
    fake_model.delay = ANSWER_SECONDS
    b, a = workspaces[BETA], workspaces[ALPHA]

    def run_of_b() -> tuple[float, int, float, float]:
        """B's run of B_TURNS turns: (seconds it took, its model requests, when it started and ended)."""
        fake_model.policy = SteadyPolicy(B_TURNS)
        before, started = len(fake_model.requests), time.monotonic()
        thread = ask(s, fake_slack, b, "expense ratio VTI SCHB ITOT")
        assert "Final" in ended(fake_slack, CHANNELS[BETA], thread, 120)
        finished = time.monotonic()
        return finished - started, len(fake_model.requests) - before, started, finished

    run_of_b()  # the worker's first run warms it (imports, tokens): not a pace
    pace_alone, requests_alone, _, _ = run_of_b()

    # A's runs meet the hostile answers; B asks the same once they have begun, and runs beside them.
    asked_at = time.monotonic()
    threads_of_a = [ask(s, fake_slack, a, f"fees of {MARK} fund number {n}") for n in range(RUNS_OF_A)]
    wait_for(lambda: len(hostile_at) >= RUNS_OF_A, 60, "A's runs to meet their first hostile answers")
    pace_beside, requests_beside, started, finished = run_of_b()
    assert requests_beside == requests_alone, "B's run did the same work beside A's"
    assert any(started <= t <= finished for t in hostile_at), "A's runs were answered with hostile headers during B's"
    # A shared pause (even one clamped to 120 s) would have held B for minutes: its pace is its own.
    assert pace_beside <= 2 * pace_alone + 5, f"B took {pace_beside:.1f} s beside A's runs, {pace_alone:.1f} s alone"

    # A's runs end, each request having waited at most the patience in all, with a reason that says why.
    reports = [ended(fake_slack, CHANNELS[ALPHA], ts, 6 * PATIENCE_SECONDS + 60) for ts in threads_of_a]
    took = time.monotonic() - asked_at
    assert took <= 6 * PATIENCE_SECONDS + 90, f"A's runs took {took:.0f} s to end"
    store = RunStore(Redis.from_url(redis_url))
    for ts, report in zip(threads_of_a, reports, strict=True):
        (run_id,) = store.thread_run_ids(ALPHA, CHANNELS[ALPHA], ts)
        state = store.get(run_id)
        assert state.status.finished and "refused one request" in state.reason and "429" in state.reason, (
            state.status,
            state.reason,
            report,
        )
    assert len(hostile_at) >= 2 * RUNS_OF_A, "each of A's requests asked again after its (cut) pause"
