"""A task agent's budget, carved out of what the lead may still spend on exploration.

The lead's finalization reserve is never part of the pool, and the lead keeps a few
requests beyond it to write sections from what comes back. Each child's time ends a margin
before the lead's own exploration deadline, so its findings arrive before the lead must write.
"""

from __future__ import annotations

from .. import defaults
from ..budget import Ledger
from ..config import Budget
from ..exceptions import TaskRefused


def carve(lead: Ledger, now: float, call_budgets: list[int]) -> list[Budget]:
    """One budget per brief, or TaskRefused when even the smallest useful child does not fit."""
    room = lead.room(now)
    parts = len(call_budgets)
    requests = int(room["requests"]) - defaults.LEAD_KEEPS_REQUESTS
    share = requests // parts
    if share < defaults.TASK_MIN_REQUESTS:
        raise TaskRefused(
            f"Not enough budget left for {parts} task agent(s): {max(0, requests)} model requests can be spared, "
            f"and each needs at least {defaults.TASK_MIN_REQUESTS}. "
            + ("Give fewer tasks, or research" if parts > 1 else "Research")
            + " this directly with web_search and "
            "read_page, or write up what you have."
        )
    seconds = min(room["active"], room["wall"]) - defaults.TASK_RETURN_MARGIN_SECONDS
    if seconds < defaults.TASK_MIN_SECONDS:
        raise TaskRefused(
            f"Too little time left for task agents ({max(0.0, seconds):.0f} s before you must write). "
            "Research directly or write up what you have."
        )
    reserve = min(float(defaults.TASK_RESERVE_SECONDS), seconds / 3)
    budgets = []
    for calls in call_budgets:
        budget = Budget(
            profile="task agent",
            max_requests=min(calls + defaults.TASK_RESERVE_REQUESTS, share),
            active_seconds=seconds,
            wall_seconds=seconds,
            reserve_requests=defaults.TASK_RESERVE_REQUESTS,
            reserve_seconds=reserve,
        )
        # Token and cost caps, where the run has them, are split evenly.
        if "input_tokens" in room:
            budget.max_input_tokens = int(room["input_tokens"] / parts)
        if "output_tokens" in room:
            budget.max_output_tokens = int(room["output_tokens"] / parts)
        if "cost" in room:
            budget.max_cost_usd = room["cost"] / parts
        budgets.append(budget)
    return budgets
