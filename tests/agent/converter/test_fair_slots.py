"""Conversion slots shared fairly by run (agent/converter/fair_queue.py): one run's queue of slow
documents cannot delay another run's file, and one run's total conversion time is bounded.
Generated: any interleaving of runs queueing conversions."""
from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.converter.fair_queue import ConversionAccount, FairSlots
from agent.exceptions import ConversionBudgetSpent


async def _convert(slots: FairSlots, account: ConversionAccount, log: list[str], seconds: float = 0.01) -> None:
    async with slots.slot(account):
        log.append(account.run)
        await asyncio.sleep(seconds)


@settings(max_examples=40, deadline=None)
@given(queued=st.lists(st.integers(min_value=1, max_value=8), min_size=2, max_size=4))
def test_runs_waiting_are_served_in_turn_and_none_holds_more_than_its_share(queued: list[int]) -> None:
    async def scenario() -> list[str]:
        slots = FairSlots(parallel=2, per_run=1, budget_seconds=1_000)
        accounts = [ConversionAccount(f"run{i}") for i in range(len(queued))]
        log: list[str] = []
        busiest = 0

        async def watch() -> None:
            nonlocal busiest
            while True:
                busiest = max(busiest, *slots._busy.values(), 0)  # noqa: SLF001
                assert sum(slots._busy.values()) <= 2  # noqa: SLF001
                await asyncio.sleep(0)

        watcher = asyncio.create_task(watch())
        await asyncio.gather(*[_convert(slots, a, log) for a, n in zip(accounts, queued, strict=True) for _ in range(n)])
        watcher.cancel()
        assert busiest <= 1, "a run holds one slot at most"
        return log

    log = asyncio.run(scenario())
    # Round robin: at every point, runs with conversions still queued have been served within one of each other.
    served = dict.fromkeys((f"run{i}" for i in range(len(queued))), 0)
    for run in log:
        served[run] += 1
        pending = [served[f"run{i}"] for i, n in enumerate(queued) if served[f"run{i}"] < n]
        assert not pending or max(pending) - min(pending) <= 1, (queued, log)


async def test_another_runs_file_starts_at_once_while_one_run_has_ten_queued() -> None:
    slots = FairSlots(parallel=2, per_run=1, budget_seconds=1_000)
    busy, other, log = ConversionAccount("busy"), ConversionAccount("other"), []
    ten = [asyncio.create_task(_convert(slots, busy, log, 0.2)) for _ in range(10)]
    await asyncio.sleep(0.05)
    started = asyncio.get_running_loop().time()
    await _convert(slots, other, log)
    assert asyncio.get_running_loop().time() - started < 0.1, "not behind the busy run's queue"
    for task in ten:
        task.cancel()
    await asyncio.gather(*ten, return_exceptions=True)
    assert not slots._busy and not slots._waiting and not slots._served_at, "nothing left behind"  # noqa: SLF001


async def test_a_run_that_spent_its_conversion_time_is_refused_with_what_to_do_and_others_are_not() -> None:
    slots = FairSlots(parallel=2, per_run=1, budget_seconds=0.1)
    spender, other, log = ConversionAccount("spender"), ConversionAccount("other"), []
    await _convert(slots, spender, log, 0.15)
    with pytest.raises(ConversionBudgetSpent, match="already spent its 0 s of document conversion"):
        await _convert(slots, spender, log)
    await _convert(slots, other, log)
    assert log == ["spender", "other"]
