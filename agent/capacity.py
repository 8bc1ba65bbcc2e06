"""Shared model capacity: the organization's requests and tokens per minute, handed out fairly.

The model service limits an organization, not a run: requests, input tokens and output tokens
per minute, per model. A `ModelLimiter` is the one place every model request of every run asks
for its share before it is sent (`try_acquire`), hears what the service said about the limits
afterwards (`observe`: the `anthropic-ratelimit-*` headers, a 429's `retry-after`), and gives
back a place it will not use (`withdraw`). Shares are fair between workspaces first and then
between a workspace's runs (round robin by who was served longest ago), so a workspace with 50
runs waiting gets the same turns as one with 2, and each of those 2 runs gets half of its own.

This module holds the protocol and the in-memory version (the terminal, tests); the SDK middleware
that calls it once per HTTP attempt is capacity_middleware.py (so the SDK's own retries wait their
turn too, and what only reads limits need not import the SDK). The Redis version, shared by every
worker, is jobs/budgets/capacity.py.

A run that waits shows "waiting for model capacity" and the wait does not count against its
active time: the loop in charge of the request installs a `CapacityWait` hook (a context
variable, so a task agent's requests pause its own ledger, not the lead's).
"""

from __future__ import annotations

import contextvars
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from .capacity_learning import LEARN_BINDING_SHARE, LEARN_CUTS_PER_REQUEST, learned_step
from .context.tokens import CHARS_PER_TOKEN
from .provider_values import count, held_limit, pause_seconds, reset_seconds

__all__ = [
    "CAPACITY_NOTE",
    "CAPACITY_WAIT",
    "STREAM_SETTLE",
    "WAITING_FOR_CAPACITY",
    "Demand",
    "ModelLimits",
    "MemoryModelLimiter",
    "ModelLimiter",
    "Observed",
    "observed",
    "uncached_estimate",
]

WAITING_FOR_CAPACITY = "Waiting for model capacity"
# ModelLimits assumed until the service's headers say otherwise (or the operator sets them): the
# API's first tier, so a new deployment is careful rather than answered with 429s.
DEFAULT_REQUESTS_PER_MINUTE = 50.0
DEFAULT_INPUT_TOKENS_PER_MINUTE = 30_000.0
DEFAULT_OUTPUT_TOKENS_PER_MINUTE = 8_000.0
# Where neither the operator nor the service names a limit (Bedrock, Vertex, a gateway send no
# `anthropic-ratelimit-*` headers), the limiter learns it: it starts here, permissive (twenty
# times the first tier's requests, the fourth tier's tokens), cuts every limit on a throttling
# answer and raises it again while answers succeed (the rule: capacity_learning.py).
LEARN_START_REQUESTS_PER_MINUTE = 1_000.0
LEARN_START_INPUT_TOKENS_PER_MINUTE = 2_000_000.0
LEARN_START_OUTPUT_TOKENS_PER_MINUTE = 400_000.0
# Output tokens are counted against the limit when a request starts; a turn rarely writes its
# whole max_tokens, so this much is reserved at most (the headers correct the rest).
OUTPUT_RESERVE_TOKENS = 4_096
# A waiting request asks again at least this often: it learns of its grant within a second.
MAX_POLL_SECONDS = 1.0
MIN_POLL_SECONDS = 0.05
# A waiter that stops asking for this long has gone (its process died): its place is dropped.
WAITER_TTL_SECONDS = 30.0

HEADER = "anthropic-ratelimit-"
DIMENSIONS = ("requests", "input_tokens", "output_tokens")
_HEADER_NAMES = {"requests": "requests", "input_tokens": "input-tokens", "output_tokens": "output-tokens"}


@dataclass(frozen=True)
class ModelLimits:
    """Per minute, per model; None: not set here (the service's headers or the default decide)."""

    requests: float | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None

    def get(self, dimension: str) -> float | None:
        value: float | None = getattr(self, dimension)
        return value


DEFAULT_LIMITS = ModelLimits(
    DEFAULT_REQUESTS_PER_MINUTE, DEFAULT_INPUT_TOKENS_PER_MINUTE, DEFAULT_OUTPUT_TOKENS_PER_MINUTE
)
LEARN_START = ModelLimits(
    LEARN_START_REQUESTS_PER_MINUTE, LEARN_START_INPUT_TOKENS_PER_MINUTE, LEARN_START_OUTPUT_TOKENS_PER_MINUTE
)
# Where a limit in force came from (doctor --live, the metrics, a long wait's progress).
SOURCE_SET = "set"
SOURCE_HEADERS = "headers"
SOURCE_LEARNED = "learned"
# The setting that raises each limit, named when a run has waited long for it.
LIMIT_SETTINGS = {
    "requests": "DEEPTHREAD_MODEL_REQUESTS_PER_MINUTE",
    "input_tokens": "DEEPTHREAD_MODEL_INPUT_TOKENS_PER_MINUTE",
    "output_tokens": "DEEPTHREAD_MODEL_OUTPUT_TOKENS_PER_MINUTE",
}


@dataclass(frozen=True)
class Demand:
    """One model request asking for its share: who asks (workspace, run) and what it costs."""

    team: str
    run: str
    model: str
    input_tokens: int
    output_tokens: int
    requests: int = 1
    ticket: str = field(default_factory=lambda: uuid.uuid4().hex)

    def need(self, dimension: str) -> float:
        return float(getattr(self, dimension))


@dataclass(frozen=True)
class Observed:
    """What one response said about the organization's limits (every value read strictly and
    clamped: agent/provider_values.py)."""

    limits: ModelLimits
    remaining: ModelLimits
    # How long this answer asks its own request to hold off (a 429's retry-after, else its
    # requests-reset), at most provider_values.MAX_PAUSE_SECONDS. Only the request that was told
    # waits it: one answer never pauses the other runs (the limits and remaining figures pace them).
    retry_after: float | None = None
    # What was reserved for a request the service failed (5xx) or refused (429) without counting it:
    # given back, so an outage's retries, or one workspace's refused requests, take no one's turn
    # (except from a learned limit, whose cut on a throttle leaves nothing in the bucket).
    unused: ModelLimits = field(default_factory=ModelLimits)
    # The service refused for load (a 429 other than a spend limit, Bedrock's ThrottlingException,
    # Vertex's RESOURCE_EXHAUSTED): a learned limit is cut. `answered`: it served the request,
    # so a learned limit may rise.
    throttled: bool = False
    answered: bool = False
    # The demand whose answer this is: a throttled answer to a request granted before the last
    # cut says nothing new (the cut already counted it), so it does not cut again.
    ticket: str = ""
    # How many times this request was throttled before (0: its first answer), and the service's
    # answer count (what `observe` returned) at its previous throttle. A request throttled again
    # cuts a learned limit only while no one was answered in between, LEARN_CUTS_PER_REQUEST times
    # at most: one throttled again and again (too big, or its key's) must not drag the others down.
    attempt: int = 0
    since: int = 0


def _limits_of(lower: Mapping[str, str], kind: str) -> ModelLimits:
    return ModelLimits(**{d: count(lower.get(f"{HEADER}{_HEADER_NAMES[d]}-{kind}")) for d in DIMENSIONS})


def observed(headers: Mapping[str, str], status: int, now: Callable[[], float] = time.time) -> Observed:
    """The `anthropic-ratelimit-*` headers (and a 429's `retry-after`) of one response, read strictly:
    a value that is not a plain non-negative number (or a valid time) is not read at all."""
    lower = {k.lower(): v for k, v in headers.items()}
    retry_after = None
    if status == 429:
        retry_after = pause_seconds(lower, now)
        if retry_after is None:
            retry_after = reset_seconds(lower.get(f"{HEADER}requests-reset"), now)
    return Observed(
        limits=_limits_of(lower, "limit"),
        remaining=_limits_of(lower, "remaining"),
        retry_after=retry_after,
        throttled=status == 429,
        answered=200 <= status < 300,
    )


def is_spend_limit(message: str) -> bool:
    """A 429 that says a spend limit was reached: waiting does not help, so it is not retried."""
    lowered = message.lower()
    return any(words in lowered for words in ("spend limit", "spending limit", "credit balance", "billing"))


def uncached_estimate(body: Mapping[str, Any]) -> int:
    """Input tokens the request will likely count against the limit: cached prefix reads do not,
    so only what follows the last cache breakpoint of the messages (the whole request when it
    has none) is counted. The service's headers correct the estimate after every response."""
    messages = body.get("messages") or []
    tail_chars = 0
    marked = False
    for message in reversed(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        for block in reversed(blocks):
            if isinstance(block, dict) and "cache_control" in block:
                marked = True
                break
            tail_chars += len(str(block))
        if marked:
            break
    if not marked:
        tail_chars += len(str(body.get("system") or "")) + len(str(body.get("tools") or ""))
    return max(1, tail_chars // CHARS_PER_TOKEN)


class ModelLimiter(Protocol):
    """The organization's model capacity, shared by every run that holds this limiter."""

    async def try_acquire(self, demand: Demand) -> float:
        """0 when `demand` may be sent now (its share is taken); else seconds before asking again
        (math.inf: never, it is larger than a whole minute of a limit the operator or the service
        named). Asking again with the same demand keeps its place in the queue."""
        ...

    async def withdraw(self, demand: Demand) -> None:
        """The demand will not be sent (its caller was cancelled): leave the queue."""
        ...

    async def observe(self, model: str, seen: Observed) -> int:
        """What the service said: its limits and what remains (each limit held within a factor of
        the one in force). Returns how many requests the service has answered so far (a request
        throttled again passes it back as `Observed.since`)."""
        ...


# --- the fair queue, shared by the in-memory limiter (jobs/budgets/capacity.py is the same in Lua) ---


@dataclass
class _Bucket:
    level: float
    at: float


@dataclass
class _ModelState:
    buckets: dict[str, _Bucket]
    limits: dict[str, float]
    sources: dict[str, str] = field(default_factory=dict)
    cut_at_grant: int = 0  # how many grants had been made at the last cut
    ceiling: float = 0.0  # the learned requests limit before its last cut (0: never cut)
    answers: int = 0  # answered requests, ever
    answers_at_cut: int = 0  # … when the learned limit was last cut
    probe: str = ""  # after a cut, the one request let through until an answer comes back …
    probe_at: float = 0.0  # … and when (a probe never heard of is given up after WAITER_TTL_SECONDS)
    grants: int = 0
    grant_numbers: dict[str, int] = field(default_factory=dict)  # ticket -> its grant's number, until answered
    seq: int = 0
    teams: dict[str, int] = field(default_factory=dict)  # team -> when last served (seq)
    runs: dict[str, dict[str, int]] = field(default_factory=dict)  # team -> run -> when last served
    queue: dict[str, list[Demand]] = field(default_factory=dict)  # run -> its waiting demands, in order
    served: dict[str, int] = field(default_factory=dict)  # team or run left the queue -> when last served
    granted: set[str] = field(default_factory=set)
    never: set[str] = field(default_factory=set)  # tickets larger than a named limit, until told
    seen: dict[str, float] = field(default_factory=dict)  # ticket -> when its waiter last asked


def _shortfall(need: float, level: float, limit: float, *, known: bool = False) -> float:
    """Seconds until `need` fits the bucket (0: now). A request larger than a whole minute's limit
    never fits one the operator or the service named (math.inf: the run is told at once); past a
    learned one, it goes once the bucket is full, rather than never."""
    if need <= level:
        return 0.0
    if need > limit and known:
        return math.inf
    if need > limit and level >= limit:
        return 0.0
    return (min(need, limit) - level) / (limit / 60.0)


class MemoryModelLimiter:
    """One process's limiter (the terminal, tests): the same fair queue as the Redis version."""

    def __init__(self, configured: ModelLimits | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.configured = configured or ModelLimits()
        self.clock = clock
        self._models: dict[str, _ModelState] = {}
        self.grants: list[Demand] = []  # in the order they were granted (tests read it)

    def _state(self, model: str) -> _ModelState:
        state = self._models.get(model)
        if state is None:
            now = self.clock()
            limits = {d: self.configured.get(d) or LEARN_START.get(d) or 1.0 for d in DIMENSIONS}
            sources = {d: SOURCE_SET if self.configured.get(d) else SOURCE_LEARNED for d in DIMENSIONS}
            state = _ModelState(
                buckets={d: _Bucket(limits[d], now) for d in DIMENSIONS}, limits=limits, sources=sources
            )
            self._models[model] = state
        return state

    def limits_of(self, model: str) -> ModelLimits:
        """The limits in force for `model` (the operator's, else the service's, else the defaults)."""
        return ModelLimits(**self._state(model).limits)

    async def holding(self, demand: Demand) -> tuple[str, float, str]:
        """The limit `demand` waits for: (dimension, limit, source)."""
        state = self._state(demand.model)
        self._refill(state, self.clock())
        d = tightest(demand, {k: b.level for k, b in state.buckets.items()}, state.limits)
        return d, state.limits[d], state.sources[d]

    def sources_of(self, model: str) -> dict[str, str]:
        """Where each limit in force came from: set, headers or learned."""
        return dict(self._state(model).sources)

    def _refill(self, state: _ModelState, now: float) -> None:
        for d, bucket in state.buckets.items():
            limit = state.limits[d]
            bucket.level = min(limit, bucket.level + max(0.0, now - bucket.at) * limit / 60.0)
            bucket.at = now

    async def try_acquire(self, demand: Demand) -> float:
        state = self._state(demand.model)
        now = self.clock()
        self._refill(state, now)
        if demand.ticket in state.granted:
            state.granted.discard(demand.ticket)
            return 0.0
        state.seen[demand.ticket] = now
        queue = state.queue.setdefault(demand.run, [])
        if all(d.ticket != demand.ticket for d in queue):
            queue.append(demand)
            state.runs.setdefault(demand.team, {}).setdefault(demand.run, state.served.get(demand.run, 0))
            state.teams.setdefault(demand.team, state.served.get(demand.team, 0))
        wait = self._grant(state, now)
        if demand.ticket in state.granted:
            state.granted.discard(demand.ticket)
            return 0.0
        if demand.ticket in state.never:
            state.never.discard(demand.ticket)
            return math.inf
        return min(MAX_POLL_SECONDS, max(MIN_POLL_SECONDS, wait))

    def _grant(self, state: _ModelState, now: float) -> float:
        """Grant waiting demands in fair order while capacity lasts; the wait of the next one."""
        while state.teams:
            team = min(state.teams, key=lambda t: (state.teams[t], t))
            runs = state.runs[team]
            run = min(runs, key=lambda r: (runs[r], r))
            head = state.queue[run][0]
            if now - state.seen.get(head.ticket, now) > WAITER_TTL_SECONDS:
                self._dequeue(state, team, run, served=False)
                continue
            short = [
                wait
                for d in DIMENSIONS
                if (
                    wait := _shortfall(
                        head.need(d), state.buckets[d].level, state.limits[d], known=state.sources[d] != SOURCE_LEARNED
                    )
                )
            ]
            if math.inf in short:  # it can never be sent: its waiter hears so (math.inf) and leaves
                self._dequeue(state, team, run, served=False)
                state.never.add(head.ticket)
                continue
            if short:
                return max(short)
            if self._probing(state, now):  # after a cut, one request at a time until one is answered
                return MAX_POLL_SECONDS
            if state.cut_at_grant and state.answers == state.answers_at_cut:
                state.probe, state.probe_at = head.ticket, now
            for d in DIMENSIONS:
                state.buckets[d].level -= head.need(d)
            state.granted.add(head.ticket)
            state.grants += 1
            state.grant_numbers[head.ticket] = state.grants
            self.grants.append(head)
            self._dequeue(state, team, run, served=True)
        return 0.0

    @staticmethod
    def _probing(state: _ModelState, now: float) -> bool:
        return bool(state.probe) and now - state.probe_at < WAITER_TTL_SECONDS

    def _dequeue(self, state: _ModelState, team: str, run: str, *, served: bool) -> None:
        head = state.queue[run].pop(0)
        state.seen.pop(head.ticket, None)
        if served:
            state.seq += 1
            state.teams[team] = state.runs[team][run] = state.seq
        if not state.queue[run]:
            del state.queue[run]
            state.served[run] = state.runs[team].pop(run)
        if not state.runs[team]:
            del state.runs[team]
            state.served[team] = state.teams.pop(team)

    async def withdraw(self, demand: Demand) -> None:
        state = self._state(demand.model)
        state.granted.discard(demand.ticket)
        state.grant_numbers.pop(demand.ticket, None)
        if state.probe == demand.ticket:
            state.probe = ""
        queue = state.queue.get(demand.run, [])
        for n, waiting in enumerate(queue):
            if waiting.ticket == demand.ticket:
                if n == 0:
                    self._dequeue(state, demand.team, demand.run, served=False)
                else:
                    del queue[n]
                break

    async def observe(self, model: str, seen: Observed) -> int:
        state = self._state(model)
        now = self.clock()
        self._refill(state, now)
        self._learn(state, seen)
        for d in DIMENSIONS:
            heard = None if self.configured.get(d) else held_limit(d, seen.limits.get(d), state.limits[d])
            if heard is not None:
                state.limits[d], state.sources[d] = heard, SOURCE_HEADERS
            if not (seen.throttled and state.sources[d] == SOURCE_LEARNED):  # a learned cut empties the bucket
                state.buckets[d].level = min(state.limits[d], state.buckets[d].level + (seen.unused.get(d) or 0.0))
            remaining = seen.remaining.get(d)
            if remaining is not None:
                state.buckets[d].level = min(state.buckets[d].level, remaining)
        return state.answers

    def _learn(self, state: _ModelState, seen: Observed) -> None:
        """Cut or raise the limits no one named (capacity_learning.py; jobs/budgets/capacity.py's Lua)."""
        number = state.grant_numbers.pop(seen.ticket, None)
        if seen.answered:
            state.answers += 1
        if seen.ticket == state.probe or seen.answered:
            state.probe = ""
        learning = [d for d in DIMENSIONS if state.sources[d] == SOURCE_LEARNED and seen.limits.get(d) is None]
        if not learning:
            return
        before = state.limits["requests"]
        step = learned_step(
            before,
            state.ceiling,
            throttled=seen.throttled,
            answered=seen.answered,
            cut_due=(number is None or number > state.cut_at_grant)
            and (seen.attempt == 0 or (seen.attempt < LEARN_CUTS_PER_REQUEST and state.answers <= seen.since)),
            descending=state.answers == state.answers_at_cut,
            binding=min(state.buckets[d].level / state.limits[d] for d in learning) < LEARN_BINDING_SHARE,
        )
        state.ceiling = step.ceiling
        if step.cut:
            state.cut_at_grant, state.answers_at_cut = state.grants, state.answers
        factor = step.limit / before
        for d in learning:
            state.limits[d] = min(LEARN_START.get(d) or 1.0, state.limits[d] * factor)
            if step.cut:  # the service has no room now: nothing is left in the bucket either
                state.buckets[d].level = 0.0
            state.buckets[d].level = min(state.buckets[d].level, state.limits[d])


# --- the hook the loop installs, and the SDK middleware ---------------------------------------

# Entered when a request starts waiting for capacity, left when it goes out (or is cancelled).
CapacityWait = Callable[[], AbstractAsyncContextManager[None]]
CAPACITY_WAIT: contextvars.ContextVar[CapacityWait | None] = contextvars.ContextVar("capacity_wait", default=None)
# Told, once, what holds a request that has waited longer than LONG_WAIT_SECONDS (the progress line).
CapacityNote = Callable[[str], Awaitable[None]]
CAPACITY_NOTE: contextvars.ContextVar[CapacityNote | None] = contextvars.ContextVar("capacity_note", default=None)

# A streamed answer's `usage` arrives after the middleware has handed the response on: the middleware
# leaves here how to give back the output tokens reserved but not written, and the model client calls
# it with the final message's output tokens (so a streamed turn, too, holds only what it wrote).
StreamSettle = Callable[[int], Awaitable[None]]
STREAM_SETTLE: contextvars.ContextVar[StreamSettle | None] = contextvars.ContextVar("stream_settle", default=None)
# A wait longer than this is not a moment's queue: the run says which limit holds it.
LONG_WAIT_SECONDS = 60.0
_DIMENSION_WORDS = {"requests": "requests", "input_tokens": "input tokens", "output_tokens": "output tokens"}


def holding_note(dimension: str, limit: float, source: str) -> str:
    """The progress line of a long wait: which limit holds it, where it came from, what raises it."""
    came = {SOURCE_SET: "set", SOURCE_HEADERS: "the service's", SOURCE_LEARNED: "learned"}.get(source, source)
    return (
        f"{WAITING_FOR_CAPACITY}: the {_DIMENSION_WORDS[dimension]} limit holds it "
        f"({limit:,.0f} a minute, {came}); {LIMIT_SETTINGS[dimension]} raises it"
    )


def tightest(demand: Demand, levels: Mapping[str, float], limits: Mapping[str, float]) -> str:
    """The dimension `demand` waits longest for: the limit that holds it."""
    return max(DIMENSIONS, key=lambda d: _shortfall(demand.need(d), levels[d], max(limits[d], 1.0)))
