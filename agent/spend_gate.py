"""A monthly budget shared by concurrent runs: each model request is reserved against it before it
is sent and settled after, so runs of one workspace see each other's spending as it happens.

Before: each run was capped at what its budget had left when it started, so six runs started
together each saw the whole budget and spent 8.1× a $0.01 budget between them. Now every Messages
attempt of a run asks the gate first (`SpendMiddleware`): the gate admits it while the budgets the
run counts against are not yet reached, counting what every run of them has spent and has in
flight, and reserves the request's expected cost atomically (jobs/budgets/reservations.py); the
answer's real cost replaces the reservation. So the overspend is at most the requests in flight
when a budget is crossed: one request per concurrent run (bench.budget_overspend). A refused run
ends with what it has (BudgetSpent, a ModelUnavailable: the loop salvages its sections), its
report saying which budget.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from anthropic import APIRequest, AsyncAPIResponse, AsyncCallNext, Middleware

from .capacity import OUTPUT_RESERVE_TOKENS, uncached_estimate
from .exceptions import BudgetSpent
from .pricing import cost_usd
from .provider_values import token_count
from .usage import Usage

__all__ = ["SPEND_SETTLE", "SpendGate", "SpendMiddleware"]

MESSAGES_PATH = "/v1/messages"

# A streamed answer's usage arrives after the middleware has handed the response on: the middleware
# leaves here how to settle the request's cost, and the model client calls it with the final usage.
SpendSettle = Callable[[Usage], Awaitable[None]]
SPEND_SETTLE: contextvars.ContextVar[SpendSettle | None] = contextvars.ContextVar("spend_settle", default=None)


class SpendGate(Protocol):
    """The budgets one run counts against, shared with the other runs that count against them."""

    async def reserve(self, usd: float) -> str | None:
        """Reserve `usd` for the next request: None when it may be sent, else why not (the budget
        spent, in words for the run's reason)."""
        ...

    async def settle(self, reserved: float, spent: float) -> None:
        """The request reserved `reserved` and cost `spent` (0 when it was not answered)."""
        ...


def _usage_of(body: Mapping[str, Any]) -> Usage:
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    assert isinstance(usage, dict)
    return Usage(
        input_tokens=token_count(usage.get("input_tokens")),
        output_tokens=token_count(usage.get("output_tokens")),
        cache_read_tokens=token_count(usage.get("cache_read_input_tokens")),
        cache_creation_tokens=token_count(usage.get("cache_creation_input_tokens")),
    )


class SpendMiddleware(Middleware):
    """Every Messages API attempt of one run is reserved against its budgets first, then settled."""

    def __init__(self, gate: SpendGate) -> None:
        self.gate = gate

    async def handle_async(self, request: APIRequest, call_next: AsyncCallNext) -> AsyncAPIResponse[Any]:
        body = request.json if isinstance(request.json, Mapping) else None
        if request.method.lower() != "post" or not request.url.endswith(MESSAGES_PATH) or body is None:
            return await call_next(request)
        model = str(body.get("model", ""))
        expected = Usage(
            input_tokens=uncached_estimate(body),
            output_tokens=min(int(body.get("max_tokens") or 0), OUTPUT_RESERVE_TOKENS),
        )
        reserved = cost_usd(model, expected)
        refusal = await self.gate.reserve(reserved)
        if refusal is not None:
            raise BudgetSpent(refusal)
        try:
            response = await call_next(request)
        except BaseException:
            await self.gate.settle(reserved, 0.0)
            raise
        if response.status_code >= 300:
            await self.gate.settle(reserved, 0.0)
        elif request.stream:
            SPEND_SETTLE.set(self._settler(model, reserved))
        else:
            try:
                spent = cost_usd(model, _usage_of(json.loads(await response.http_response.aread())))
            except (ValueError, TypeError):
                spent = reserved
            await self.gate.settle(reserved, spent)
        return response

    def _settler(self, model: str, reserved: float) -> SpendSettle:
        async def settle(usage: Usage) -> None:
            await self.gate.settle(reserved, cost_usd(model, usage))

        return settle
