"""One model turn: the request every turn sends, and what its reply tells the team besides its content.

A turn is an activity interval on the ledger (model time counts, like tool time, once however
many things overlap it). After each reply the run's usage is announced, and a "Checking: …"
or "Settled: …" line in the reply updates where the thread is told sources disagree.
"""

from __future__ import annotations

from typing import Any

from .budget import Clock, Ledger
from .citations import strip_unknown_markers
from .config import AgentConfig
from .events import ConflictSettled, Disagreement, Emit, UsageRecorded
from .model import ModelClient

__all__ = ["Turn"]

CHECKING_PREFIX = "checking:"  # the system prompt asks for this line when sources disagree
SETTLED_PREFIX = "settled:"  # …and for this one once the disagreement is resolved
DISAGREEMENT_CHARS = 300


class Turn:
    def __init__(
        self,
        model: ModelClient,
        emit: Emit,
        config: AgentConfig,
        clock: Clock,
        system: list[dict[str, Any]],
        tool_schemas: list[dict[str, Any]],
    ) -> None:
        self.model = model
        self.emit = emit
        self.config = config
        self.clock = clock
        # Tools, then system, form the stable front of every request (cache breakpoint there).
        self.system = system
        self.tool_schemas = tool_schemas

    async def ask(self, ledger: Ledger, messages: list[dict[str, Any]], final: bool, deadline: float) -> Any:
        """One request; `final` switches tools off (the answer must be written now)."""
        ledger.begin(self.clock())
        try:
            return await self.model.turn(
                system=self.system,
                tools=self.tool_schemas,
                messages=messages,
                max_tokens=self.config.main_max_tokens,
                tool_choice={"type": "none"} if final else None,
                timeout=max(1.0, min(self.config.request_timeout, deadline)),
            )
        finally:
            ledger.end(self.clock())

    async def record_usage(self, ledger: Ledger) -> None:
        u = self.model.usage
        now = self.clock()
        # One counter: "model requests" and "requests left" both read the ledger's count, the one
        # the budget enforces (model turns, task agents' included; page reading is not a request).
        await self.emit(
            UsageRecorded(
                requests=ledger.requests,
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                cache_read_tokens=u.cache_read_tokens,
                cache_creation_tokens=u.cache_creation_tokens,
                thinking_tokens=u.thinking_tokens,
                web_search_requests=u.web_search_requests,
                cost_usd=ledger.cost_usd,
                profile=ledger.budget.profile,
                requests_left=max(0, ledger.budget.max_requests - ledger.requests),
                minutes_left=ledger.seconds_to_end(now) / 60,
            )
        )

    async def report_disagreement(self, content: list[Any]) -> None:
        """A "Checking: …" line in the model's turn tells the thread where sources disagree; a
        "Settled: …" line takes it off the progress message (the resolution goes in the report)."""
        for block in content:
            if block.type != "text":
                continue
            for line in block.text.splitlines():
                lowered = line.strip().lower()
                for prefix, settled in ((CHECKING_PREFIX, False), (SETTLED_PREFIX, True)):
                    if lowered.startswith(prefix):
                        text = line.strip()[len(prefix) :].strip()
                        if text:
                            text = strip_unknown_markers(text, set())[:DISAGREEMENT_CHARS]
                            await self.emit(ConflictSettled(text=text) if settled else Disagreement(text=text))
                        return
