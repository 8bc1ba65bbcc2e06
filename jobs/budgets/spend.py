"""What runs cost, and the monthly budgets that cap it: the one owner of the spend records.

Every finished run is recorded once (idempotent per run id) with its cost, priced as
`deepthread inspect` prices it (each model request's tokens by kind × its model's price,
`agent.pricing.cost_usd`), against its workspace, channel, requester and day:

    deepthread:spend:run:{run id}          string: the run's RunSpend (JSON); also the "recorded" mark
    deepthread:spend:{team}:{YYYY-MM}      hash: total / channel:{C} / user:{U} / day:{YYYY-MM-DD} /
                                           person:{U} (that person's runs in direct messages), each as
                                           :micros (millionths of a dollar), :runs, :requests
    deepthread:spend:{team}:{YYYY-MM}:runs sorted set: run id by cost (the most expensive runs)
    deepthread:spend:{team}:{YYYY-MM}:runs:{C}  the same, for one channel (a channel's own usage)
    deepthread:budgets:{team}              hash: workspace / channel:{C} / person:{U} -> micros, or "off"

Sums are kept in whole micro-dollars, so every rollup is exactly the sum of its runs.
Months are UTC calendar months, counted by when the run finished.

Budgets are monthly, per channel, per person (for questions asked in direct messages, which belong
to no channel) and per workspace: an operator default from the environment (`BudgetDefaults`, set
once at start-up with `configure`) that an admin's override in Redis replaces, "off" included.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Literal, cast

from pydantic import BaseModel, Field
from redis import Redis

from agent.config import Caps
from agent.events import utcnow
from agent.pricing import cost_usd
from agent.usage import usage_by_model

from ..keyspace import keys
from ..keyspace.connection import text
from ..records.models import RunState
from ..records.run_fields import Write
from ..records.store import RunNotFound, RunStore
from ..records.store_scripts import WriteOutcome
from ..records.stores import load_request_records

__all__ = [
    "BudgetDefaults",
    "CapState",
    "MonthUsage",
    "RunSpend",
    "Spend",
    "Tally",
    "configure",
    "month_of",
    "record_spend",
    "run_cost_usd",
]

log = logging.getLogger(__name__)

MICROS = 1_000_000
# Spend records outlive the runs they count (90 days), so last year's months stay comparable.
SPEND_TTL_SECONDS = 400 * 24 * 3600
# The most expensive runs a usage report lists.
TOP_RUNS = 5
NO_TEAM = keys.NO_TEAM
OFF = "off"

Scope = Literal["channel", "workspace", "person"]
# The runs of one channel read for its own usage reply (by person, most expensive first).
CHANNEL_RUNS_READ = 500


def is_direct(channel: str | None) -> bool:
    """A direct message with the bot (Slack's ids: D…), which belongs to no channel's budget."""
    return bool(channel) and str(channel).startswith("D")


_RECORD = """
-- KEYS: run record, month hash, month runs zset, the channel's runs zset, the live spend (reservations.py).
--       ARGV: run json, ttl, micros, requests, channel, user, day, run id, "1" when asked in a direct message
-- The run's live reservations go in the same step as its total comes in: never counted twice, never lost.
redis.call('HDEL', KEYS[5], 'run:' .. ARGV[8], 'at:' .. ARGV[8], 'in:' .. ARGV[8])
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then return 0 end
local dims = {'total', 'channel:' .. ARGV[5], 'user:' .. ARGV[6], 'day:' .. ARGV[7]}
if ARGV[9] == '1' then table.insert(dims, 'person:' .. ARGV[6]) end
for _, d in ipairs(dims) do
  redis.call('HINCRBY', KEYS[2], d .. ':micros', ARGV[3])
  redis.call('HINCRBY', KEYS[2], d .. ':runs', 1)
  redis.call('HINCRBY', KEYS[2], d .. ':requests', ARGV[4])
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[8])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[8])
redis.call('EXPIRE', KEYS[2], ARGV[2])
redis.call('EXPIRE', KEYS[3], ARGV[2])
redis.call('EXPIRE', KEYS[4], ARGV[2])
return 1
"""


class BudgetDefaults(BaseModel):
    """Operator defaults (DEEPTHREAD_CHANNEL_BUDGET_USD, DEEPTHREAD_WORKSPACE_BUDGET_USD,
    DEEPTHREAD_PERSON_BUDGET_USD); None: no cap."""

    channel_usd: float | None = Field(default=None, ge=0)
    workspace_usd: float | None = Field(default=None, ge=0)
    person_usd: float | None = Field(default=None, ge=0)  # each person's questions in direct messages


_configured = BudgetDefaults()
# The month part of the live spend's key (jobs/budgets/reservations.py): the runs still going.
LIVE = "live"


def configured_defaults() -> BudgetDefaults:
    """This process's defaults from the environment (configure)."""
    return _configured


def budget_field(channel: str | None, user: str | None, defaults: BudgetDefaults) -> tuple[str, float | None]:
    """The budget a run counts against besides its workspace's, as its field and default: a person's
    in a direct message (or with no channel), else the channel's ("" when neither)."""
    if user and (channel is None or is_direct(channel)):
        return f"person:{user}", defaults.person_usd
    if channel:
        return f"channel:{channel}", defaults.channel_usd
    return "", None


def label_of(field: str, limit_micros: int) -> str:
    """A budget's name in a run's reason ("channel budget ($50.00/month)"), from its field."""
    scope = field.partition(":")[0]
    name = {"person": "personal", "total": "workspace"}.get(scope, scope)
    return f"{name} budget ({usd(limit_micros)}/month)"


def configure(defaults: BudgetDefaults) -> None:
    """Set the environment's defaults for this process (serve and workers both call it at start-up)."""
    global _configured
    _configured = defaults


class RunSpend(BaseModel):
    """One finished run, as the usage report lists it."""

    run_id: str
    team: str
    channel: str
    user: str
    thread_ts: str | None = None
    question: str = ""
    status: str = ""
    micros: int
    requests: int
    finished_at: datetime

    @property
    def usd(self) -> float:
        return self.micros / MICROS


class Tally(BaseModel):
    key: str  # a channel id, a user id, a day
    micros: int = 0
    runs: int = 0
    requests: int = 0

    @property
    def usd(self) -> float:
        return self.micros / MICROS


class CapState(BaseModel):
    """One monthly budget in force and where this month stands against it."""

    scope: Scope
    limit_micros: int
    spent_micros: int
    overridden: bool  # set by an admin (else the environment's default)

    @property
    def left_micros(self) -> int:
        return max(0, self.limit_micros - self.spent_micros)

    @property
    def reached(self) -> bool:
        return self.spent_micros >= self.limit_micros

    @property
    def label(self) -> str:
        """How a run's reason names it: "channel budget ($50.00/month)"."""
        return f"{'personal' if self.scope == 'person' else self.scope} budget ({usd(self.limit_micros)}/month)"


class MonthUsage(BaseModel):
    team: str
    month: str  # YYYY-MM
    total: Tally
    channels: list[Tally]  # most expensive first
    users: list[Tally]
    days: list[Tally]  # in date order
    top_runs: list[RunSpend]


def usd(micros: int) -> str:
    return f"${micros / MICROS:,.2f}"


def month_of(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m")


def run_cost_usd(redis: Redis, run_id: str) -> float:
    """The run's cost as `deepthread inspect` totals it: tokens by kind per model, each at its price."""
    by_model = usage_by_model(load_request_records(redis, run_id))
    return sum(cost_usd(model, usage) for model, usage in by_model.items())


class Spend:
    def __init__(self, redis: Redis, defaults: BudgetDefaults | None = None) -> None:
        self.redis = redis
        self._defaults = defaults
        self._record = redis.register_script(_RECORD)

    @property
    def defaults(self) -> BudgetDefaults:
        return self._defaults or _configured

    # --- keys (with the record that owns them) -------------------------------------

    # --- recording -----------------------------------------------------------------

    def record(self, state: RunState) -> RunSpend | None:
        """Count a finished run once (later calls for the same run change nothing). The run's
        cost also goes into its run state, so the report footer shows it. None when the run
        has not finished or was recorded before."""
        if not state.status.finished:
            return None
        run = state.run
        cost = run_cost_usd(self.redis, run.id) or state.usage.cost_usd
        finished = state.finished_at or utcnow()
        spent = RunSpend(
            run_id=run.id,
            team=run.team or NO_TEAM,
            channel=run.channel or "",
            user=run.requester or "",
            thread_ts=run.thread_ts,
            question=run.question[:200],
            status=state.status.value,
            micros=round(cost * MICROS),
            requests=state.usage.requests,
            finished_at=finished,
        )
        month = month_of(finished)
        added = self._record(
            keys=[
                keys.spend_run(run.id),
                keys.spend_month(run.team, month),
                keys.spend_month(run.team, month) + ":runs",
                keys.spend_month(run.team, month) + f":runs:{spent.channel or '-'}",
                keys.spend_month(run.team, LIVE),
            ],
            args=[
                spent.model_dump_json(),
                SPEND_TTL_SECONDS,
                spent.micros,
                spent.requests,
                spent.channel or "-",
                spent.user or "-",
                finished.astimezone(UTC).strftime("%Y-%m-%d"),
                run.id,
                "1" if is_direct(run.channel) else "0",
            ],
        )
        if not added:
            return None
        self._show_cost(state, cost)
        return spent

    def _show_cost(self, state: RunState, cost: float) -> None:
        """The run's cost into its (finished) run state: a references-only write, allowed after the end.
        A run that cost nothing shows nothing new, so nothing is written (no version for nothing)."""
        if round(cost, 6) == round(state.usage.cost_usd, 6):
            return
        usage = state.usage.model_copy(update={"cost_usd": cost})
        result = RunStore(self.redis).write(
            state.run.id, Write(fields={"usage": usage.model_dump_json()}), after_finish=True
        )
        if result.outcome == WriteOutcome.not_found:
            raise RunNotFound(state.run.id)

    def recorded(self, run_id: str) -> RunSpend | None:
        raw = self.redis.get(keys.spend_run(run_id))
        return RunSpend.model_validate_json(raw) if raw else None

    # --- reading -------------------------------------------------------------------

    def month(self, team: str | None, month: str | None = None) -> MonthUsage:
        month = month or month_of(utcnow())
        key = keys.spend_month(team, month)
        raw = self.redis.hgetall(key)
        tallies: dict[str, Tally] = {}
        for field, value in raw.items():
            name, _, measure = text(field).rpartition(":")
            tally = tallies.setdefault(name, Tally(key=name.partition(":")[2] or name))
            setattr(tally, measure, int(text(value)))
        ids = [text(m) for m in cast(list[bytes | str], self.redis.zrevrange(key + ":runs", 0, TOP_RUNS - 1))]
        top = [r for r in (self.recorded(i) for i in ids) if r is not None]

        def group(kind: str) -> list[Tally]:
            return [t for name, t in tallies.items() if name.startswith(f"{kind}:")]

        by_cost = lambda ts: sorted(ts, key=lambda t: (-t.micros, t.key))  # noqa: E731
        return MonthUsage(
            team=team or NO_TEAM,
            month=month,
            total=tallies.get("total", Tally(key="total")),
            channels=by_cost(group("channel")),
            users=by_cost(group("user")),
            days=sorted(group("day"), key=lambda t: t.key),
            top_runs=top,
        )

    def channel_runs(self, team: str | None, channel: str, month: str | None = None) -> list[RunSpend]:
        """One channel's runs this month, most expensive first (its own usage reply)."""
        key = keys.spend_month(team, month or month_of(utcnow())) + f":runs:{channel}"
        ids = [text(m) for m in cast(list[bytes | str], self.redis.zrevrange(key, 0, CHANNEL_RUNS_READ - 1))]
        return [r for r in (self.recorded(i) for i in ids) if r is not None]

    # --- budgets -------------------------------------------------------------------

    def set_budget(
        self, team: str | None, scope: Scope, usd_per_month: float | None, channel: str = "", user: str = ""
    ) -> None:
        """An admin's monthly budget for a channel, a person (their direct messages) or the workspace;
        None lifts it ("off"), which also overrides the environment's default."""
        field = {"workspace": "workspace", "channel": f"channel:{channel}", "person": f"person:{user}"}[scope]
        value = OFF if usd_per_month is None else str(round(usd_per_month * MICROS))
        self.redis.hset(keys.budgets(team), field, value)

    def budget_new_workspace(self, team: str, usd_per_month: float) -> bool:
        """A newly installed workspace's monthly budget, unless it already has one of its own (a reinstall
        keeps what its admins set, "off" included). True when this set it."""
        return bool(self.redis.hsetnx(keys.budgets(team), "workspace", str(round(usd_per_month * MICROS))))

    def budget_new_org(self, enterprise: str, usd_per_month: float) -> bool:
        """An org-wide (Enterprise Grid) install: the budget each of its workspaces starts with, kept under
        the org's id until a workspace of it first asks (adopt_org_budget). True when this set it."""
        return bool(self.redis.hsetnx(keys.budgets(enterprise), "workspace", str(round(usd_per_month * MICROS))))

    def adopt_org_budget(self, enterprise: str, team: str) -> None:
        """A workspace of an org-wide install starts with the org's new-workspace budget, as a workspace
        install does (unless it has one of its own, "off" included)."""
        budget = self.redis.hget(keys.budgets(enterprise), "workspace")
        if budget is not None:
            self.redis.hsetnx(keys.budgets(team), "workspace", budget)

    def caps(self, team: str | None, channel: str | None, user: str | None = None) -> list[CapState]:
        """The budgets in force for a run in this channel (or, in a direct message or with no channel,
        for this person), with this month's spend against each."""
        month = keys.spend_month(team, month_of(utcnow()))
        person = user if user and (channel is None or is_direct(channel)) else None
        overrides_raw, spent_raw = self._read(team, channel, person, month)
        found = []
        wanted: list[tuple[Scope, str, float | None]] = [("workspace", "workspace", self.defaults.workspace_usd)]
        if person:
            wanted.insert(0, ("person", f"person:{person}", self.defaults.person_usd))
        elif channel:
            wanted.insert(0, ("channel", f"channel:{channel}", self.defaults.channel_usd))
        for scope, field, default in wanted:
            override = overrides_raw.get(field)
            if override == OFF or (override is None and default is None):
                continue
            limit = int(override) if override is not None else round(cast(float, default) * MICROS)
            spent = spent_raw.get(f"{'total' if scope == 'workspace' else field}:micros", 0)
            found.append(CapState(scope=scope, limit_micros=limit, spent_micros=spent, overridden=override is not None))
        return found

    def _read(
        self, team: str | None, channel: str | None, person: str | None, month: str
    ) -> tuple[dict[str, str], dict[str, int]]:
        fields = ["total:micros", f"channel:{channel}:micros", f"person:{person}:micros"]
        pipe = self.redis.pipeline(transaction=False)
        pipe.hgetall(keys.budgets(team))
        pipe.hmget(month, fields)
        overrides, values = pipe.execute()
        spent = {field: int(text(value)) if value else 0 for field, value in zip(fields, values, strict=True)}
        return {text(k): text(v) for k, v in overrides.items()}, spent

    def cap_refusal(self, team: str | None, channel: str, user: str | None = None) -> str | None:
        """The reply for a question that would start over a monthly cap, or None."""
        for cap in self.caps(team, channel, user):
            if cap.reached:
                return refusal(cap)
        return None

    def remaining_usd(self, team: str | None, channel: str, user: str | None = None) -> float | None:
        """What is left this month under the tighter cap (0 when reached); None: no cap."""
        caps = self.caps(team, channel, user)
        return min(c.left_micros for c in caps) / MICROS if caps else None

    def run_caps(self, team: str | None, channel: str | None, caps: Caps, user: str | None = None) -> Caps:
        """The operator's caps, with the cost cap lowered to what the tighter monthly budget has
        left, named after that budget so a run that reaches it says which one it was."""
        tightest = min(self.caps(team, channel, user), key=lambda c: c.left_micros, default=None)
        if tightest is None:
            return caps
        left = tightest.left_micros / MICROS
        if caps.max_cost_usd is not None and caps.max_cost_usd <= left:
            return caps
        return caps.model_copy(update={"max_cost_usd": left, "cost_limit_name": tightest.label})


def record_spend(redis: Redis, state: RunState) -> None:
    """Count a finished run against its channel's and workspace's month (once per run): called
    wherever a run ends (the job, a forced stop, a failure to post, recovery giving up).
    Accounting trouble is logged, never allowed to change how the run ended."""
    try:
        Spend(redis).record(state)
    except Exception:
        log.exception("run %s: its cost could not be recorded", state.run.id)


def refusal(cap: CapState) -> str:
    today = utcnow()
    next_month = datetime(today.year + today.month // 12, today.month % 12 + 1, 1, tzinfo=UTC)
    where, command = {
        "channel": ("This channel has used its monthly budget", "budget #channel $X/month"),
        "person": ("Your questions in direct messages have used your monthly budget", "budget @person $X/month"),
        "workspace": ("This workspace has used its monthly budget", "budget workspace $X/month"),
    }[cap.scope]
    return (
        f"{where}: {usd(cap.spent_micros)} of {usd(cap.limit_micros)} "
        f"in {today:%B %Y}, so I started nothing. A workspace admin can raise it (`{command}`) or lift it "
        f"(`{command.split(' $')[0]} off`); otherwise it resets on {next_month:%-d %B}. "
        "Reply `usage` to see what it was spent on."
    )
