"""jobs/budgets/spend.py against a real Redis, and the budget command's parser: recording is once per run,
every rollup is exactly the sum of its runs, and budgets resolve override > default."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis import Redis

from agent.budget import Ledger
from agent import capabilities
from agent.config import Caps, budget_for
from agent.usage import Usage
from bot.desk.budgets import BudgetChange, parse_budget
from bot.exceptions import BudgetSyntaxError
from jobs import Run, RunState, RunStatus, RunStore
from jobs.budgets.spend import MICROS, BudgetDefaults, Spend, month_of

NOW = datetime.now(UTC)


def finished_run(
    redis: Redis, *, channel: str, user: str, cost: float, requests: int = 3, team: str = "T1"
) -> RunState:
    """A finished run whose request log holds one request of `cost` (Sonnet 5.5's input price, from the
    capability table)."""
    run = Run(team=team, channel=channel, thread_ts="1700000000.000100", requester=user, question="q")
    state = RunStore(redis).create(run)
    tokens = round(cost * 1_000_000 / capabilities("claude-sonnet-5-5").input_usd)
    redis.rpush(
        f"deepthread:requests:{run.id}",
        f'{{"n": 1, "kind": "turn", "model": "claude-sonnet-5-5", "input_tokens": {tokens}}}',
    )
    return state.model_copy(
        update={"status": RunStatus.completed, "finished_at": NOW, "usage": Usage(requests=requests)}
    )


def test_a_run_is_counted_once_however_often_it_is_recorded(redis: Redis) -> None:
    spend = Spend(redis)
    state = finished_run(redis, channel="C1", user="U1", cost=0.3)
    first = spend.record(state)
    assert first is not None and first.micros == 300_000
    assert spend.record(state) is None
    month = spend.month("T1")
    assert (month.total.micros, month.total.runs, month.total.requests) == (300_000, 1, 3)
    # The run's own state carries its cost now: the report footer reads it.
    assert RunStore(redis).get(state.run.id).usage.cost_usd == pytest.approx(0.3)


def test_an_unfinished_run_is_not_recorded(redis: Redis) -> None:
    state = finished_run(redis, channel="C1", user="U1", cost=0.3).model_copy(update={"status": RunStatus.running})
    assert Spend(redis).record(state) is None
    assert Spend(redis).month("T1").total.runs == 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["C1", "C2", "D9"]),
            st.sampled_from(["U1", "U2", "U3"]),
            st.integers(min_value=0, max_value=5_000_000),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_every_rollup_is_exactly_the_sum_of_its_runs(redis: Redis, runs: list[tuple[str, str, int]]) -> None:
    redis.flushdb()
    spend = Spend(redis)
    recorded = [spend.record(finished_run(redis, channel=c, user=u, cost=m / 1e6)) for c, u, m in runs]
    micros = {r.run_id: r.micros for r in recorded if r is not None}
    month = spend.month("T1")
    assert month.total.micros == sum(micros.values())
    assert sum(t.micros for t in month.channels) == month.total.micros
    assert sum(t.micros for t in month.users) == month.total.micros
    assert sum(t.micros for t in month.days) == month.total.micros
    assert sum(t.runs for t in month.channels) == len(runs)
    assert [r.micros for r in month.top_runs] == sorted(micros.values(), reverse=True)[:5]


def test_budgets_resolve_override_then_default_and_off_lifts_a_default(redis: Redis) -> None:
    spend = Spend(redis, BudgetDefaults(channel_usd=1.0, workspace_usd=10.0))
    spend.record(finished_run(redis, channel="C1", user="U1", cost=0.75))
    assert spend.remaining_usd("T1", "C1") == pytest.approx(0.25)
    assert spend.remaining_usd("T1", "C2") == pytest.approx(1.0), "another channel has its own default"
    assert spend.cap_refusal("T1", "C1") is None

    spend.set_budget("T1", "channel", 0.5, "C1")
    refusal = spend.cap_refusal("T1", "C1")
    assert refusal and "This channel has used its monthly budget: $0.75 of $0.50" in refusal
    assert spend.remaining_usd("T1", "C1") == 0

    spend.set_budget("T1", "channel", None, "C1")  # off: the environment's default no longer applies
    assert spend.remaining_usd("T1", "C1") == pytest.approx(10.0 - 0.75), "only the workspace budget is left"
    spend.set_budget("T1", "workspace", 0.75, "")
    assert "This workspace has used its monthly budget" in (spend.cap_refusal("T1", "C1") or "")
    assert Spend(redis).remaining_usd("T9", "C1") is None, "no defaults configured: no cap"


def test_the_run_cost_cap_is_what_the_tighter_budget_has_left_and_names_it(redis: Redis) -> None:
    spend = Spend(redis, BudgetDefaults(channel_usd=2.0, workspace_usd=100.0))
    spend.record(finished_run(redis, channel="C1", user="U1", cost=1.5))
    caps = spend.run_caps("T1", "C1", Caps(max_requests=50))
    budget = budget_for("deep", caps)  # an upgrade mid-run keeps the cap: the control applies the same caps
    assert budget.max_cost_usd == pytest.approx(0.5) and budget.max_requests == 50
    ledger = Ledger.start(budget, clock=lambda: 0.0)
    ledger.cost_usd = 0.6  # spent past what the channel had left
    decision = ledger.decide(0.0)
    assert decision.kind == "end" and decision.reason == "channel budget ($2.00/month)"
    # An operator cap lower than what is left wins, and keeps its own name.
    assert spend.run_caps("T1", "C1", Caps(max_cost_usd=0.1)).cost_limit_name is None


def test_month_of_is_the_utc_calendar_month() -> None:
    assert month_of(datetime(2026, 11, 30, 23, 59, tzinfo=UTC)) == "2026-11"
    assert MICROS == 1_000_000


# ------------------------------------------------------------------------ the command


@pytest.mark.parametrize(
    ("text", "change"),
    [
        ("budget <#C0TEST|general> $50/month", BudgetChange(scope="channel", channel="C0TEST", usd=50)),
        ("<@UBOT> budget <#C0TEST> $1,250.50 per month", BudgetChange(scope="channel", channel="C0TEST", usd=1250.5)),
        ("budget workspace $200/month", BudgetChange(scope="workspace", usd=200)),
        ("budget workspace 200 USD a month", BudgetChange(scope="workspace", usd=200)),
        ("budget <#C0TEST|general> off", BudgetChange(scope="channel", channel="C0TEST", usd=None)),
        ("Budget here $5", BudgetChange(scope="channel", channel="C0HERE", usd=5)),
    ],
)
def test_budget_commands_are_read(text: str, change: BudgetChange) -> None:
    assert parse_budget(text, here="C0HERE") == change


@pytest.mark.parametrize("question", ["budget airlines in Europe compared", "budgets of EU member states", "usage"])
def test_questions_that_start_with_the_word_stay_questions(question: str) -> None:
    assert parse_budget(question) is None


@given(st.text(max_size=60))
def test_any_text_after_budget_is_read_or_refused_with_advice(tail: str) -> None:
    try:
        change = parse_budget(f"budget <#C0TEST|general> {tail}")
    except BudgetSyntaxError as exc:
        assert "`budget #channel $50/month`" in str(exc) or "`off`" in str(exc)
        return
    assert change is not None and change.channel == "C0TEST"
    assert change.usd is None or 0 <= change.usd <= 1_000_000


@given(st.decimals(min_value=0, max_value=999_999, places=2, allow_nan=False))
def test_every_dollar_amount_round_trips(amount) -> None:  # noqa: ANN001
    change = parse_budget(f"budget workspace ${amount:,}/month")
    assert change is not None and change.usd == pytest.approx(float(amount))


def test_a_long_budget_command_is_refused_before_any_pattern_backtracks_over_it() -> None:
    import time

    from bot.desk.budgets import parse_budget, wants_budgets

    start = time.perf_counter()
    assert not wants_budgets("budget a" + "\n" * 39_990 + "x")
    with pytest.raises(BudgetSyntaxError):
        parse_budget("budget workspace $" + "1" * 40_000 + "x")
    assert time.perf_counter() - start < 1.0  # the quadratic patterns took 7 s and more
