"""Parallel task agents: do three branches take as long as the slowest, and is their work
counted once?

    .venv/bin/python -m bench.parallel [--repeat 3]

Three scripted branches (two searches and one page read each) whose tools answer with
different latencies run as task agents of one spawn_tasks call, against the fake Messages
API. The baseline, in the same run: each branch alone, in a spawn_tasks call of its own.
Figures: the parallel call's wall time over the slowest branch's (goal ≤ 1.1), and the
run's active time (the union of the lead's and the task agents' intervals) against the sum
of the branches' own active times (what counting each interval separately would give).
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass

from anthropic import AsyncAnthropic
from pydantic import BaseModel

from agent import AgentConfig, Budget, ResearchTask, research
from agent.backend import RunBackend
from agent.budget import Ledger
from agent.results import MemoryResultStore, StoredResult
from agent.task_agents.report import STORED_KIND, TaskReport, from_stored
from agent.tools import Calculator, FetchResult, Tool, ToolContext, ToolResult
from agent.tools.report_tools import ReviseSection, WriteSection
from agent.tools.spawn_tasks import SpawnTasks
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.bulk import BulkRead, BulkSearch
from tests.fakes.policies import TaskAgentsPolicy
from tests.fakes.server import ServerThread

# Each branch's tools answer after this many seconds (the first word of its objective picks it).
LATENCY = {"alpha": 0.2, "bravo": 0.5, "charlie": 1.0}
OBJECTIVES = ["alpha fund expense ratios", "bravo index tracking error", "charlie holdings and turnover"]
SEARCHES = 2  # per branch, then one page read and the findings
GOAL_WALL_RATIO = 1.1


def _latency(text: str) -> float:
    return next((seconds for word, seconds in LATENCY.items() if word in text), 0.0)


class SlowSearch(BulkSearch):
    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        await asyncio.sleep(_latency(str(args.model_dump())))
        return await super().run(args, ctx)


class SlowRead(BulkRead):
    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        await asyncio.sleep(_latency(str(args.model_dump())))
        return await super().run(args, ctx)


class TimedSpawn(SpawnTasks):
    """spawn_tasks, timed from the call to its one result."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        started = time.perf_counter()
        try:
            return await super().run(args, ctx)
        finally:
            self.seconds.append(time.perf_counter() - started)


class Reports(MemoryResultStore):
    def __init__(self) -> None:
        super().__init__()
        self.reports: list[TaskReport] = []

    async def put(self, result: StoredResult) -> None:
        if result.kind == STORED_KIND:
            self.reports.append(from_stored(result))
        await super().put(result)


@dataclass
class Figures:
    spawn_seconds: float  # the spawn_tasks call, wall time
    run_active: float  # the lead's ledger: union of every interval in the run
    branch_active: list[float]  # each task agent's own ledger


async def one_run(fake: FakeAnthropic, url: str, objectives: list[str]) -> Figures:
    fake.policy = TaskAgentsPolicy(objectives, searches=SEARCHES)
    spawn = TimedSpawn()
    tools: list[Tool] = [SlowSearch(), SlowRead(), Calculator(), FetchResult(), spawn, WriteSection(), ReviseSection()]
    store = Reports()
    ledger = Ledger.start(Budget())

    async def emit(_: object) -> None:
        return None

    async with AsyncAnthropic(api_key="bench", base_url=url) as client:
        outcome = await research(ResearchTask(question="Compare three funds"), AgentConfig(), anthropic=client,
                                 emit=emit, tools=tools, backend=RunBackend(results=store), ledger=ledger)
    if outcome.status != "completed" or len(store.reports) != len(objectives):
        raise RuntimeError(f"the scripted run did not complete: {outcome}")
    return Figures(spawn.seconds[0], ledger.active(time.time()), [r.active_seconds for r in store.reports])


async def measure(repeat: int) -> tuple[list[Figures], list[list[Figures]]]:
    fake = FakeAnthropic()
    parallel: list[Figures] = []
    alone: list[list[Figures]] = [[] for _ in OBJECTIVES]
    with ServerThread(fake.app()) as server:
        for _ in range(repeat):
            parallel.append(await one_run(fake, server.url, OBJECTIVES))
            for i, objective in enumerate(OBJECTIVES):
                alone[i].append(await one_run(fake, server.url, [objective]))
    return parallel, alone


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each shape; medians are reported")
    args = parser.parse_args()
    parallel, alone = asyncio.run(measure(args.repeat))
    median = statistics.median
    wall = median(f.spawn_seconds for f in parallel)
    branch_walls = [median(f.spawn_seconds for f in runs) for runs in alone]
    slowest = max(branch_walls)
    active = median(f.run_active for f in parallel)
    branch_active = [median(f.branch_active[i] for f in parallel) for i in range(len(OBJECTIVES))]
    summed = sum(branch_active)
    wall_ok = wall / slowest <= GOAL_WALL_RATIO
    active_ok = max(branch_active) <= active < summed
    print(f"\nparallel bench — 3 scripted branches, tools answering in "
          f"{' / '.join(f'{s:g}' for s in LATENCY.values())} s, {SEARCHES} searches + 1 read each "
          f"(median of {args.repeat})\n")
    for objective, solo, own in zip(OBJECTIVES, branch_walls, branch_active):
        print(f"  branch {objective!r:<34} alone {solo:5.2f} s   in parallel, its own active time {own:5.2f} s")
    print(f"\n  {'ok ' if wall_ok else 'MISS'} wall time / slowest branch        {wall:.2f} s / {slowest:.2f} s = "
          f"{wall / slowest:.2f}   (goal ≤ {GOAL_WALL_RATIO}; one after another: {sum(branch_walls):.2f} s)")
    print(f"  {'ok ' if active_ok else 'MISS'} active time vs sum of branch times  {active:.2f} s vs {summed:.2f} s = "
          f"{active / summed:.2f}   (the run's union of intervals, lead turns included; "
          "goal: between the slowest branch and the sum)\n")
    return 0 if wall_ok and active_ok else 1


if __name__ == "__main__":
    sys.exit(main())
