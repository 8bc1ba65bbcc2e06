"""What is kept, for how long, and how it is forgotten: one rule for every key family of the key
catalogues (jobs/keyspace/keys.py here, bot/keys.py in bot/retention.py), and the deletions they drive.

Each key family has an owner, and is deleted when its owner is forgotten:

- a **run** (named by its run id): `DEEPTHREAD_RETENTION_DAYS` after the run finished, by the
  maintenance round (`Retention.round`), or with its thread, channel or workspace;
- one of a run's **messages** (its progress or report message): with the run;
- a **thread**: once its last run is gone, or when the thread is forgotten;
- a **workspace**: its settings, refusals and month totals, on uninstall or `forget --team`;
- an **installation**: its tokens, deleted by the installation store on uninstall;
- the **deployment**: shared records that name runs or threads only by id; a run's (or thread's)
  entry is removed with it (`Entry`), or the record holds no one's data at all;
- a short-lived **mark** (a lease, an event already handled): it expires by itself within its TTL
  and holds no one's words.

Deletions are found by filling each key function's arguments from what is forgotten (`Subject`):
a run id, a thread, a channel (`*` for its threads), a workspace (`*` for its channels), so a key
family added to a catalogue with a rule is covered by every forget at once, and one added without
a rule fails tests/jobs/test_retention_catalogue.py.

A thread whose run is still active is not deleted by the round (its conversation is in use; the
round deletes it once the run has ended and aged). A forget on demand, a deleted message or
channel and an uninstall stop the active runs first (`Runs.force_stop`), then delete, and list the
runs in `keys.FORGOTTEN` to be deleted once more after `FORGET_AGAIN_SECONDS`, once their killed
jobs have surely stopped writing.

The spend ledger keeps totals only: a run's own spend record (which holds its question) and its
entry among a month's most expensive runs go with the run; the month's sums stay
(`spend.SPEND_TTL_SECONDS`).
"""

from __future__ import annotations

import fnmatch
import inspect
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from types import ModuleType
from typing import Literal, cast

from redis import Redis

from agent.events import utcnow

from ..exceptions import RunNotFound
from ..keyspace import keys
from ..keyspace.connection import text
from ..process.metrics import metrics
from ..records.library import unshelve_run
from ..records.models import RunStatus
from .forgotten import Forgotten, held
from .rq_records import delete_recheck_jobs, delete_run_jobs

__all__ = [
    "JOBS_CATALOGUE",
    "Catalogue",
    "Entry",
    "Forgotten",
    "Owner",
    "Retention",
    "Rule",
    "Subject",
]

log = logging.getLogger(__name__)

# The round SCANs the keyspace for runs: once per deployment every ten minutes is enough for a
# rule counted in days, and leaves the maintenance round's other work (sweeps, stops) every 10 s.
RETENTION_INTERVAL_SECONDS = 600
# A forgotten run's killed job may still write for a moment (a stored result, a step): deleting it
# again after this long removes what it wrote after the first forget.
FORGET_AGAIN_SECONDS = 120
# Keys deleted per DEL command, and SCAN's hint of keys per step.
DELETE_BATCH = 500
SCAN_COUNT = 1000
# Runs one round deletes at most (the rest go in the next round), so a first round on a large old
# Redis does not hold the maintenance round for minutes.
MAX_RUNS_PER_ROUND = 500
DEFAULT_RETENTION_DAYS = 90.0

Reason = Literal["retention", "message_deleted", "channel_deleted", "uninstalled", "forget"]


class Owner(StrEnum):
    RUN = "run"
    MESSAGE = "message"
    THREAD = "thread"
    WORKSPACE = "workspace"
    INSTALLATION = "installation"
    DEPLOYMENT = "deployment"
    MARK = "mark"


@dataclass(frozen=True)
class Subject:
    """What is forgotten, as the values key functions are called with; `*` matches any."""

    run_id: str = "*"
    team: str | None = "*"
    channel: str = "*"
    thread_ts: str = "*"
    ts: str = "*"

    def argument(self, name: str) -> str | None:
        if name in ("ts", "report_ts"):
            return self.ts
        if name in ("run_id", "team", "channel", "thread_ts"):
            return cast(str | None, getattr(self, name))
        return "*"  # any other part of a key (a result id, a month, a method) is every one


@dataclass(frozen=True)
class Entry:
    """A shared record's entries of one run (`of` RUN) or thread (`of` THREAD), and how one goes."""

    op: Literal["srem", "zrem", "hdel", "xdel"]  # xdel: a stream's entries whose `run_id` is the run
    of: Owner = Owner.RUN
    member: Callable[[Subject], str] = lambda s: s.run_id


@dataclass(frozen=True)
class Rule:
    """Whose record a key family is: it is deleted when that owner is forgotten."""

    owner: Owner
    entry: Entry | None = None  # a deployment record: how a run's or thread's entry is removed
    # Deletes the record itself, where more than DEL is needed; returns the keys deleted. On a
    # deployment record: deletes what of it is the forgotten run's or workspace's.
    delete: Callable[[Redis, Subject], int] | None = None


@dataclass(frozen=True)
class Catalogue:
    """One key module and a rule for each of its key families."""

    module: ModuleType
    rules: dict[str, Rule]
    shared: Callable[[], Iterable[str]]  # the module's per-deployment key names (read at each use)
    not_keys: frozenset[str] = frozenset()  # helpers of the module that name no key

    def families(self) -> list[str]:
        """Every key family the module offers: its key functions and its shared names."""
        functions = [
            name
            for name, fn in inspect.getmembers(self.module, inspect.isfunction)
            if fn.__module__ == self.module.__name__ and not name.startswith("_") and name not in self.not_keys
        ]
        return sorted({*functions, *self.shared()} - self.not_keys)

    def key(self, name: str, subject: Subject) -> str | None:
        value = getattr(self.module, name)
        if isinstance(value, str):
            return value
        parameters = inspect.signature(value).parameters
        if "team" not in parameters and "run_id" not in parameters and subject.channel == "*":
            # A name from before keys had a team (`legacy_*`) cannot tell one workspace's from another's:
            # only a channel's or thread's forget reaches it, never a workspace's `*`.
            return None
        return cast(str, value(**{p: subject.argument(p) for p in parameters}))


def _delete_capacity_marks(redis: Redis, subject: Subject) -> int:
    """A run's, or a workspace's, "last served" marks in each model's capacity records (an hour
    each, jobs/budgets/capacity.py), and a workspace's queue of waiting runs."""
    if subject.run_id != "*":
        names = [f"served:r:{subject.run_id}"]
    elif subject.team not in ("*", None) and subject.channel == "*":
        names = [f"served:t:{subject.team}", f"runs:{subject.team}"]
    else:
        return 0  # a thread or a channel has none of its own
    models = [text(m) for m in redis.smembers(keys.CAPACITY_MODELS)]
    marks = [keys.capacity(m) + name for m in models for name in names]
    return int(redis.delete(*marks)) if marks else 0


def _delete_spend_run(redis: Redis, subject: Subject) -> int:
    """The run's spend record, and its entry among its month's most expensive runs: the totals stay."""
    key = keys.spend_run(subject.run_id)
    raw = redis.get(key)
    if raw is None:
        return 0
    try:
        spent = json.loads(text(raw))
        month_key = keys.spend_month(spent.get("team"), str(spent["finished_at"])[:7])
        redis.zrem(month_key + ":runs", subject.run_id)
        redis.zrem(month_key + f":runs:{spent.get('channel') or '-'}", subject.run_id)
    except (ValueError, KeyError, TypeError):  # an unreadable record: it goes all the same
        pass
    return int(redis.delete(key))


_RUN = Rule(Owner.RUN)
_MESSAGE = Rule(Owner.MESSAGE)
_THREAD = Rule(Owner.THREAD)
_WORKSPACE = Rule(Owner.WORKSPACE)
_DEPLOYMENT = Rule(Owner.DEPLOYMENT)
_MARK = Rule(Owner.MARK)

JOBS_RULES: dict[str, Rule] = {
    # Per deployment.
    # RQ's queue and registries: a run's jobs go with the run (job_id), a thread's re-check jobs with it.
    "QUEUE": Rule(Owner.DEPLOYMENT, delete=delete_recheck_jobs),
    # Run ids and versions, capped at keys.UPDATES_MAXLEN: a run's entries go with it (one pass a forget).
    "UPDATES_STREAM": Rule(Owner.DEPLOYMENT, Entry("xdel")),
    "ACTIVE_RUNS": Rule(Owner.DEPLOYMENT, Entry("srem")),
    "HARD_STOPS": Rule(Owner.DEPLOYMENT, Entry("zrem")),
    "HARD_STOP_REASONS": Rule(Owner.DEPLOYMENT, Entry("hdel")),
    "PLANS_DUE": Rule(Owner.DEPLOYMENT, Entry("zrem")),
    "UNPOSTED": Rule(Owner.DEPLOYMENT, Entry("zrem")),
    "RECHECKS_TO_SHOW": Rule(Owner.DEPLOYMENT, Entry("zrem")),
    "RECHECK_DIGESTS": Rule(Owner.DEPLOYMENT, Entry("zrem")),
    "RECHECK_NOTICES": _MARK,  # notices serve pops within seconds
    "CAPACITY_MODELS": _DEPLOYMENT,  # model names
    "CONTROL_CHANNEL": _DEPLOYMENT,  # pub/sub: nothing stored
    "RETENTION_LEASE": _MARK,
    "FORGOTTEN": Rule(Owner.DEPLOYMENT, Entry("zrem")),
    # A model's shared rate counters; a run's and a workspace's marks in them (an hour) go with them.
    "capacity": Rule(Owner.DEPLOYMENT, delete=_delete_capacity_marks),
    # A run's.
    "run": _RUN,
    "run_state": _RUN,
    "run_sections": _RUN,
    "run_section_order": _RUN,
    "run_sources": _RUN,
    "run_source_order": _RUN,
    "run_steps": _RUN,
    "stop": _RUN,
    "upgrades": _RUN,
    "feedback": _RUN,  # verdicts on the report go with the run
    "notes": _RUN,
    "plan_drafts": _RUN,
    "lock": _RUN,
    "epoch": _RUN,
    "alive": _RUN,
    "attempts": _RUN,
    "current_job": _RUN,
    "job_id": Rule(Owner.RUN, delete=delete_run_jobs),  # every job of the run, out of RQ's registries too
    "posting": _RUN,
    "result": _RUN,  # page and file texts, tool results
    "action_token": _RUN,
    "checkpoint": _RUN,
    "requests": _RUN,
    "request_parts": _RUN,
    "refused_fetches": _RUN,
    "recheck_run": _RUN,
    "recheck_digest_lease": _RUN,
    "spend_run": Rule(Owner.RUN, delete=_delete_spend_run),
    "library_doc": Rule(Owner.RUN, delete=unshelve_run),  # the report on the team's shelf, and its postings
    "dedupe": _MARK,  # a run's once-only marks ("1"), at most keys.CONTROL_TTL_SECONDS
    # A run's messages.
    "message_run": _MESSAGE,
    "legacy_message_run": _MESSAGE,
    # A thread's.
    "thread_runs": _THREAD,
    "legacy_thread_runs": _THREAD,
    "thread_profile": _THREAD,
    "legacy_thread_profile": _THREAD,
    "recheck_schedule": _THREAD,
    "legacy_recheck_schedule": _THREAD,
    "seen_urls": _THREAD,
    # A workspace's.
    "spend_month": _WORKSPACE,  # the ledger's totals: kept after their runs go, deleted with the workspace
    "budgets": _WORKSPACE,
    "workspace_settings": _WORKSPACE,  # what its admins chose (the claim check off)
    "file_refusal": _WORKSPACE,  # why a file version could not be read
    "seen": _WORKSPACE,  # events already handled, a day
    "library_term": _WORKSPACE,  # the library's index (jobs/records/library.py): word -> report numbers
    "library_docs": _WORKSPACE,
    "library_stats": _WORKSPACE,
}

JOBS_CATALOGUE = Catalogue(
    module=keys,
    rules=JOBS_RULES,
    shared=lambda: [*keys._SHARED, "QUEUE"],
    not_keys=frozenset({"configure", "prefix", "team_part"}),
)


def _time(value: bytes | str | None) -> datetime | None:
    raw = text(value) if value else ""
    return datetime.fromisoformat(raw) if raw else None


class Retention:
    """The deletions the catalogues' rules drive, for one Redis."""

    def __init__(
        self,
        redis: Redis,
        catalogues: Sequence[Catalogue] = (JOBS_CATALOGUE,),
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.redis = redis
        self.catalogues = catalogues
        self.clock = clock  # when a stopped run was forgotten (FORGOTTEN); the round takes its `now`
        self._unstreamed: dict[str, set[str]] = {}  # stream key -> runs whose entries go (one pass: _unstream)
        self._batching = 0
        self._holding = False  # within a forget that waits for its deletions to reach a replica (`held`)

    # --- deleting by owner ------------------------------------------------------------------

    def _rules(self, owner: Owner) -> list[tuple[Catalogue, str, Rule]]:
        return [(c, name, rule) for c in self.catalogues for name, rule in c.rules.items() if rule.owner == owner]

    def _delete_key(self, key: str) -> int:
        if "*" not in key:
            return int(self.redis.delete(key))
        deleted, batch = 0, []
        for found in self.redis.scan_iter(match=key, count=SCAN_COUNT):
            batch.append(found)
            if len(batch) >= DELETE_BATCH:
                deleted += int(self.redis.delete(*batch))
                batch = []
        return deleted + (int(self.redis.delete(*batch)) if batch else 0)

    def _delete_owned(self, owner: Owner, subject: Subject) -> int:
        deleted = 0
        for catalogue, name, rule in self._rules(owner):
            deleted += self._delete_rule(catalogue, name, rule, subject)
        return deleted

    def _delete_rule(self, catalogue: Catalogue, name: str, rule: Rule, subject: Subject) -> int:
        if rule.delete is not None:
            return rule.delete(self.redis, subject)
        key = catalogue.key(name, subject)
        return self._delete_key(key) if key is not None else 0

    def _remove_entries(self, of: Owner, subject: Subject) -> None:
        for catalogue, name, rule in self._rules(Owner.DEPLOYMENT):
            if rule.delete is not None:
                rule.delete(self.redis, subject)
            if rule.entry is None or rule.entry.of != of:
                continue
            key, member = catalogue.key(name, subject), rule.entry.member(subject)
            if key is None:
                continue
            if rule.entry.op == "xdel":  # read through once for every run forgotten together
                if "*" not in member:
                    self._unstreamed.setdefault(key, set()).add(member)
                continue
            remove = getattr(self.redis, rule.entry.op)
            if "*" not in member:
                remove(key, member)
                continue
            members: list[bytes]
            if rule.entry.op == "srem":
                members = list(cast(set[bytes], self.redis.smembers(key)))
            elif rule.entry.op == "zrem":
                members = cast(list[bytes], self.redis.zrange(key, 0, -1))
            else:
                members = cast(list[bytes], self.redis.hkeys(key))
            matching = [m for m in members if fnmatch.fnmatchcase(text(m), member)]
            if matching:
                remove(key, *matching)

    # --- a run, a thread, a channel, a workspace --------------------------------------------

    def forget_run(self, run_id: str) -> int:
        """Delete every record of the run (its state last, so a failure part-way is retried);
        returns the keys deleted. Its thread keeps its other runs."""
        state = self.redis.hmget(keys.run_state(run_id), ["run", "progress_message", "report_message"])
        run = json.loads(text(state[0])) if state[0] else {}
        team, channel, thread_ts = run.get("team"), run.get("channel"), run.get("thread_ts")
        deleted = 0
        if channel:
            for ts in {text(m) for m in state[1:] if m}:
                deleted += self._delete_owned(Owner.MESSAGE, Subject(team=team, channel=channel, ts=ts))
            if thread_ts:
                self.redis.lrem(keys.thread_runs(team, channel, thread_ts), 0, run_id)
                self.redis.lrem(keys.legacy_thread_runs(channel, thread_ts), 0, run_id)
        subject = Subject(run_id=run_id)
        self._remove_entries(Owner.RUN, subject)
        for catalogue, name, rule in self._rules(Owner.RUN):
            if name == "run_state":
                continue
            deleted += self._delete_rule(catalogue, name, rule, subject)
        deleted += int(self.redis.delete(keys.run_state(run_id)))
        if not self._batching:
            self._unstream()
        return deleted

    @contextmanager
    def _batched(self) -> Iterator[None]:
        """Runs forgotten together: their stream entries go in one pass at the end."""
        self._batching += 1
        try:
            yield
        finally:
            self._batching -= 1
            if not self._batching:
                self._unstream()

    def _unstream(self) -> None:
        from ..records.store import RunStore  # the stream's owner

        pending, self._unstreamed = self._unstreamed.get(keys.UPDATES_STREAM, set()), {}
        RunStore(self.redis).forget_updates(pending)  # the one stream of xdel entries

    def _thread_keys(self, subject: Subject) -> int:
        self._remove_entries(Owner.THREAD, subject)
        return self._delete_owned(Owner.THREAD, subject)

    def _forget_runs(self, run_ids: Iterable[str], *, stop: bool) -> tuple[Forgotten, bool]:
        """Forget these runs; an active one is stopped first (`stop`) or, when not, kept with the rest
        of its thread. Returns what went and whether every run went."""
        from ..lifecycle.runs import Runs  # runs imports spend, which imports the store: only when a run must stop
        from ..records.store import RunStore

        gone = Forgotten()
        ids = list(dict.fromkeys(run_ids))
        statuses = self._statuses(ids)
        active = [i for i in ids if (status := statuses.get(i)) is not None and not status.finished]
        if active and not stop:
            gone.kept_active += active
            return gone, False
        runs = Runs(RunStore(self.redis))
        for run_id in active:
            try:
                runs.force_stop(run_id, "this thread's data was deleted")
            except RunNotFound:
                pass
            gone.stopped.append(run_id)
        with self._batched():
            for run_id in ids:
                gone.keys += self.forget_run(run_id)
                gone.runs.append(run_id)
        if active:  # listed after the forget (which removes a run's every entry): deleted once more later
            self.redis.zadd(keys.FORGOTTEN, {run_id: self.clock().timestamp() for run_id in active})
        return gone, True

    def _statuses(self, run_ids: list[str]) -> dict[str, RunStatus | None]:
        if not run_ids:
            return {}
        pipe = self.redis.pipeline()
        for run_id in run_ids:
            pipe.hget(keys.run_state(run_id), "status")
        return {i: RunStatus(text(s)) if s else None for i, s in zip(run_ids, pipe.execute(), strict=True)}

    def _thread_run_ids(self, team: str | None, channel: str, thread_ts: str) -> list[str]:
        ids = [text(i) for i in self.redis.lrange(keys.thread_runs(team, channel, thread_ts), 0, -1)]
        return ids + [text(i) for i in self.redis.lrange(keys.legacy_thread_runs(channel, thread_ts), 0, -1)]

    @held
    def forget_thread(
        self, team: str | None, channel: str, thread_ts: str, reason: Reason, *, stop: bool = True
    ) -> Forgotten:
        """Delete the thread's runs and every record of the thread; its active runs are stopped
        first (`stop`), or the thread is left alone while one is active."""
        gone, complete = self._forget_runs(self._thread_run_ids(team, channel, thread_ts), stop=stop)
        if complete:
            gone.keys += self._thread_keys(Subject(team=team, channel=channel, thread_ts=thread_ts))
            gone.threads += 1
        self._count(reason, gone)
        return gone

    def _threads(self, team: str | None, channel: str) -> list[tuple[str, str]]:
        """Every (channel, thread ts) with runs of this workspace, in `channel` (or `*`: every one)."""
        head = keys.thread_runs(team, "", "")[:-2]  # …:thread:{team}
        found = []
        for key in self.redis.scan_iter(match=keys.thread_runs(team, channel, "*"), count=SCAN_COUNT):
            parts = text(key)[len(head) :].split(":")  # "", channel, ts: a thread's run list, not its `…:profile`
            if len(parts) == 3 and not parts[0] and channel in ("*", parts[1]):
                found.append((parts[1], parts[2]))
        return found

    @held
    def forget_channel(self, team: str | None, channel: str, reason: Reason) -> Forgotten:
        """Every thread of the channel (its active runs stopped first), and the channel's other records."""
        gone = Forgotten()
        for _, thread_ts in self._threads(team, channel):
            gone.add(self.forget_thread(team, channel, thread_ts, reason))
        rest = Forgotten(keys=self._thread_keys(Subject(team=team, channel=channel)))
        rest.keys += self._delete_owned(Owner.MESSAGE, Subject(team=team, channel=channel))
        self._count(reason, rest)
        gone.add(rest)
        return gone

    @held
    def forget_team(self, team: str, reason: Reason) -> Forgotten:
        """Every thread, channel and record of the workspace (its installation's tokens are the
        installation store's to delete)."""
        gone = Forgotten()
        for channel, thread_ts in self._threads(team, "*"):
            gone.add(self.forget_thread(team, channel, thread_ts, reason))
        everything = Subject(team=team)
        rest = Forgotten(keys=self._thread_keys(everything) + self._delete_owned(Owner.MESSAGE, everything))
        rest.keys += self._delete_owned(Owner.WORKSPACE, everything)
        self._remove_entries(Owner.WORKSPACE, everything)
        self._count(reason, rest)
        gone.add(rest)
        return gone

    def teams_of(self, enterprise: str) -> list[str]:
        """The workspaces of an Enterprise Grid organization that have runs here (an org-wide uninstall)."""
        teams: set[str] = set()
        for key in self.redis.scan_iter(match=keys.run_state("*"), count=SCAN_COUNT):
            raw = self.redis.hget(text(key), "run")
            run = json.loads(text(raw)) if raw else {}
            if run.get("enterprise") == enterprise and run.get("team"):
                teams.add(run["team"])
        return sorted(teams)

    # --- the maintenance round --------------------------------------------------------------

    def round(self, now: datetime, days: float, *, limit: int = MAX_RUNS_PER_ROUND) -> Forgotten:
        """Delete every run that finished more than `days` before `now` (a thread whose run is
        active is left for a later round), a thread with it once its last run is gone, and what a
        forgotten run's killed job wrote after its forget."""
        with self._batched():
            return self._round(now, days, limit)

    def _round(self, now: datetime, days: float, limit: int) -> Forgotten:
        gone = Forgotten()
        cutoff = now - timedelta(days=days)
        due = self.redis.zrangebyscore(keys.FORGOTTEN, "-inf", now.timestamp() - FORGET_AGAIN_SECONDS)
        again = [text(m) for m in cast(list[bytes], due)]
        for run_id in again:
            gone.keys += self.forget_run(run_id)
            self.redis.zrem(keys.FORGOTTEN, run_id)
        for run_id, thread in self._expired(cutoff, limit):
            if thread is None:
                one, _ = self._forget_runs([run_id], stop=False)
                gone.add(one)
                continue
            team, channel, thread_ts = thread
            ids = self._thread_run_ids(team, channel, thread_ts)
            statuses = self._statuses(ids)
            if any(s is not None and not s.finished for s in statuses.values()):
                gone.kept_active.append(run_id)  # the thread is in use: a later round, once it has ended
                continue
            one, _ = self._forget_runs([run_id], stop=False)
            gone.add(one)
            if not self._thread_run_ids(team, channel, thread_ts):
                gone.keys += self._thread_keys(Subject(team=team, channel=channel, thread_ts=thread_ts))
                gone.threads += 1
        self._count("retention", gone)
        return gone

    def _expired(self, cutoff: datetime, limit: int) -> list[tuple[str, tuple[str | None, str, str] | None]]:
        """Finished runs that ended before `cutoff`, with their thread (team, channel, ts) if any."""
        found: list[tuple[str, tuple[str | None, str, str] | None]] = []
        head, tail = keys.run_state("\0").split("\0")
        batch: list[str] = []

        def check(batch: list[str]) -> None:
            pipe = self.redis.pipeline(transaction=False)
            for key in batch:
                pipe.hmget(key, ["status", "finished_at", "run"])
            for key, (status, finished_at, raw) in zip(batch, pipe.execute(), strict=True):
                if not status or not RunStatus(text(status)).finished or len(found) >= limit:
                    continue
                run = json.loads(text(raw)) if raw else {}
                ended = _time(finished_at) or _time(run.get("created_at"))
                if ended is None or ended.astimezone(UTC) >= cutoff:
                    continue
                channel, thread_ts = run.get("channel"), run.get("thread_ts")
                thread = (run.get("team"), channel, thread_ts) if channel and thread_ts else None
                found.append((key[len(head) : -len(tail)], thread))

        for key in self.redis.scan_iter(match=keys.run_state("*"), count=SCAN_COUNT):
            batch.append(text(key))
            if len(batch) >= SCAN_COUNT:
                check(batch)
                batch = []
                if len(found) >= limit:
                    break
        if batch:
            check(batch)
        return found

    def due_round(self, now: datetime, days: float) -> Forgotten | None:
        """The round, if it is this process's turn (one process per deployment every
        RETENTION_INTERVAL_SECONDS); None when another had it."""
        if not self.redis.set(keys.RETENTION_LEASE, "1", nx=True, ex=RETENTION_INTERVAL_SECONDS):
            return None
        gone = self.round(now, days)
        if gone.runs or gone.keys:
            log.info(
                "retention: deleted %d run(s) older than %g days and %d thread(s): %d keys",
                len(gone.runs),
                days,
                gone.threads,
                gone.keys,
            )
        return gone

    @staticmethod
    def _count(reason: Reason, gone: Forgotten) -> None:
        if gone.runs:
            metrics().deletions.labels(reason=reason, record="run").inc(len(gone.runs))
        if gone.keys:
            metrics().deletions.labels(reason=reason, record="key").inc(gone.keys)
