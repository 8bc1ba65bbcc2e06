"""The key audit of `deepthread doctor --live`: every key in Redis, by owner, and the ones left over.

Each key is classified by the key catalogues (jobs/upkeep/retention.py; the bot passes bot/keys.py's too,
bot/desk/retention.py `key_audit`): its family, and so its owner. A key is *left over* when
nothing will ever delete it:

- a **mark** (owner `mark`) or a family always written with a lifetime (`EXPIRING`: leases, the
  action token, marks and counters of a workspace) that holds no TTL;
- a **run's** or a run's **message's** record with no TTL whose run no longer exists (the
  retention round finds runs by their state, so nothing deletes these any more); a run forgotten
  moments ago (`keys.FORGOTTEN`, deleted once more shortly) is not counted;
- a **thread's** record with no TTL whose thread has no run left (the round deletes a thread's
  records with its last run, so these stay);
- a key under the deployment's prefix that no family names (**unowned**), counted by its shape;
- optionally, RQ's record of a finished or failed job with no TTL (RQ expires it after the job's
  result or failure TTL).

Records meant to stay (a workspace's settings and budgets, installations, the deployment's shared
records) are never left over. Keys outside the prefix and RQ's (another deployment's, another
app's) are only counted.

Cheap on a big Redis: SCAN with COUNT (never KEYS), one pipelined TTL per SCAN batch, further
reads only for keys without a TTL, and it stops after `limit` keys (`KeyAudit.complete` says so).
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, cast

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import ResponseError

from ..keyspace import keys
from .retention import JOBS_CATALOGUE, Catalogue, Owner

__all__ = [
    "JOBS_EXPIRING",
    "MAX_KEYS",
    "KeyAudit",
    "Leftover",
    "LeftoverKind",
    "audit_keys",
]

# Keys looked at at most: ~a second of SCAN and TTLs on a local Redis; a bigger keyspace is
# audited in part, and the result says so.
MAX_KEYS = 200_000
SCAN_COUNT = 1000
# Families of jobs/keyspace/keys.py written with a TTL on every write (leases, a secret, a workspace's
# marks), whatever their owner: one without a TTL stays for good. The bot adds its own
# (bot/desk/retention.py BOT_EXPIRING).
JOBS_EXPIRING = frozenset({"lock", "posting", "recheck_digest_lease", "action_token", "seen", "file_refusal"})
# Problem lines said per kind at most (one per family or shape); the rest are summed in one line.
LINES_PER_KIND = 5
# Parameters of key functions that never hold a colon (Slack ids and timestamps, run ids).
_ONE_PART = frozenset({"run_id", "team", "channel", "thread_ts", "ts", "report_ts", "enterprise", "nonce"})
_SENTINEL = re.compile("\x00([0-9]+)\x00")
RQ_PREFIX = "rq:"
# RQ's job statuses whose record RQ gives a TTL (the job's result_ttl, failure_ttl).
_RQ_ENDED = frozenset({"finished", "failed"})

RQ = "rq"
UNOWNED = "unowned"
OTHER = "other"  # outside this deployment's prefix and not RQ's


class LeftoverKind(StrEnum):
    MARK = "mark"  # a mark with no TTL
    NO_TTL = "no_ttl"  # a family always written with a TTL, holding none
    RUN_ORPHAN = "run_orphan"  # a run's (or its message's) record, the run gone, no TTL
    THREAD_ORPHAN = "thread_orphan"  # a thread's record, no run left in the thread, no TTL
    UNOWNED = "unowned"  # under the prefix, in no family
    RQ_JOB = "rq_job"  # RQ's record of an ended job, no TTL


@dataclass
class Leftover:
    """Keys of one family (or, unowned, of one shape) that nothing will delete."""

    kind: LeftoverKind
    family: str  # the family's name; for unowned keys their shape (`deepthread:mystery:*`)
    count: int = 0
    example: str = ""
    # The example's run (RUN_ORPHAN) or thread (THREAD_ORPHAN: team, channel, thread ts).
    run_id: str | None = None
    thread: tuple[str, str, str] | None = None

    def line(self) -> str:
        """One problem line: what these are, and what to do."""
        one, n, e = self.count == 1, f"{self.count:,}", self.example
        s = "" if one else "s"
        if self.kind == LeftoverKind.MARK:
            return (
                f"Redis holds {n} {self.family} mark{s} that never expire{'s' if one else ''} (no TTL), e.g. {e}: "
                "a lease or once-only "
                "mark must expire by itself, and one that never does blocks or skips its work for good; delete "
                f"{'it' if one else 'them'} (redis-cli DEL) and report a bug: what wrote it left out its TTL"
            )
        if self.kind == LeftoverKind.NO_TTL:
            return (
                f"Redis holds {n} {self.family} record{s} without the TTL every write gives them, e.g. {e}: "
                "a lease held for good blocks its work, a secret or a mark outlives its use; delete "
                f"{'it' if one else 'them'} (redis-cli DEL) and report a bug: what wrote it left out its TTL"
            )
        if self.kind == LeftoverKind.RUN_ORPHAN:
            listed = (
                f"list run {self.run_id}'s with redis-cli --scan --pattern '*{self.run_id}*', delete them"
                if self.run_id
                else "delete them"
            )
            return (
                f"Redis holds {n} {self.family} record{s} of runs that no longer exist, with no TTL, e.g. {e}: "
                f"nothing deletes a run's records once its run state is gone; {listed} (redis-cli DEL), and "
                "report a bug: something wrote them after their run was forgotten, or without their TTL"
            )
        if self.kind == LeftoverKind.THREAD_ORPHAN:
            team, channel, thread_ts = self.thread or ("-", "?", "?")
            return (
                f"Redis holds {n} {self.family} record{s} of threads with no run left, with no TTL, e.g. {e}: "
                "nothing deletes a thread's records once its last run is gone; run `deepthread forget --team "
                f"{team} --channel {channel} --thread {thread_ts}` (and likewise for the others), and report a bug"
            )
        if self.kind == LeftoverKind.UNOWNED:
            return (
                f"Redis holds {n} key{s} no module owns, like {e} ({self.family}): no key catalogue (jobs/keyspace/keys.py, "
                "bot/keys.py) names them, so no forget or retention round deletes them; if the app writes them, "
                "report a bug (their family needs a retention rule), else delete them: "
                f"redis-cli --scan --pattern '{self.family}' | xargs redis-cli DEL"
            )
        return (
            f"Redis holds {n} RQ record{s} of finished or failed jobs with no TTL, e.g. {e}: RQ expires a job's "
            "record after its result or failure TTL (a day here), and these stay for good; delete "
            f"{'it' if one else 'them'} (redis-cli DEL) and report a bug"
        )


@dataclass
class KeyAudit:
    """What the audit found: keys by owner, Redis's memory, and the keys left over."""

    keys: int = 0  # keys audited
    total: int = 0  # keys in the database (DBSIZE)
    complete: bool = True  # False: the audit stopped after `limit` keys
    # Keys audited per owner (jobs.upkeep.retention.Owner values), and "rq", "unowned", "other".
    by_owner: Counter[str] = field(default_factory=Counter)
    used_memory: int = 0  # bytes, the server's (INFO memory used_memory)
    leftovers: list[Leftover] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """One line per family left over (at most LINES_PER_KIND a kind, then their sum)."""
        lines: list[str] = []
        for kind in LeftoverKind:
            found = sorted((o for o in self.leftovers if o.kind == kind), key=lambda o: (-o.count, o.family))
            lines += [o.line() for o in found[:LINES_PER_KIND]]
            rest = found[LINES_PER_KIND:]
            if rest:
                lines.append(
                    f"…and {sum(o.count for o in rest):,} more {kind.value.replace('_', ' ')} key(s) of "
                    f"{len(rest)} other families or shapes, the same way"
                )
        return lines

    def fact(self) -> str:
        """The fact line: `Redis keys: N (runs X, threads Y, …), used memory M MB`."""
        labels = {
            Owner.RUN: "runs",
            Owner.MESSAGE: "messages",
            Owner.THREAD: "threads",
            Owner.WORKSPACE: "workspaces",
            Owner.INSTALLATION: "installations",
            Owner.DEPLOYMENT: "deployment",
            Owner.MARK: "marks",
            RQ: "RQ",
            UNOWNED: "unowned",
            OTHER: "other prefixes",
        }
        parts = ", ".join(f"{label} {self.by_owner[o]:,}" for o, label in labels.items() if self.by_owner[o])
        counted = f"{self.keys:,}" if self.complete else f"{self.total:,}, the first {self.keys:,} audited"
        return f"Redis keys: {counted} ({parts or 'none'}), used memory {self.used_memory / 1e6:.1f} MB"


@dataclass(frozen=True)
class _Family:
    name: str
    owner: Owner
    pattern: re.Pattern[str]
    literal: int  # characters of the key that are not parameters: the more, the more specific


def _families(catalogues: Iterable[Catalogue], head: str) -> tuple[dict[str, list[_Family]], list[_Family]]:
    """Each family as a pattern with a named group per parameter, indexed by the first part after
    the prefix (most specific first); and those whose first part is a parameter."""
    by_part: dict[str, list[_Family]] = {}
    anywhere: list[_Family] = []
    for catalogue in catalogues:
        for name, rule in catalogue.rules.items():
            value = getattr(catalogue.module, name, None)
            if isinstance(value, str):
                template, params = value, []
            elif callable(value):
                params = list(inspect.signature(value).parameters)
                template = cast(Callable[..., str], value)(**{p: f"\x00{i}\x00" for i, p in enumerate(params)})
            else:
                continue
            if not template.startswith(head):
                continue  # not a key of its own (the queue's name, RQ's job id)
            regex, literal, named = "", 0, set()
            pieces = _SENTINEL.split(template)
            for i, piece in enumerate(pieces):
                if i % 2 == 0:
                    regex += re.escape(piece)
                    literal += len(piece)
                    continue
                param = params[int(piece)]
                group = "ts" if param in ("thread_ts", "report_ts") else param
                if group in named:
                    regex += f"(?P={group})"
                else:
                    named.add(group)
                    regex += f"(?P<{group}>{'[^:]+' if param in _ONE_PART else '.+'})"
            if template.endswith(":"):
                regex += ".*"  # a prefix of records (a model's capacity records)
            family = _Family(name, rule.owner, re.compile(regex), literal)
            first = template[len(head) :].split(":", 1)[0]
            if "\x00" in first:
                anywhere.append(family)
            else:
                by_part.setdefault(first, []).append(family)
    for found in by_part.values():
        found.sort(key=lambda f: -f.literal)
    anywhere.sort(key=lambda f: -f.literal)
    return by_part, anywhere


def _shape(key: str, head: str) -> str:
    """The key with every part holding a digit (a run id, a Slack ts or id, a month) as `*`, so one
    line covers a family of unowned keys."""
    parts = key[len(head) :].split(":")
    return head + ":".join("*" if any(c.isdigit() for c in part) else part for part in parts)


def _answers(pipe: Pipeline) -> list[Any]:
    """The pipeline's answers, None for a key of another type than the family's (an unowned
    key's look-alike, a record written wrong): the audit reads on, it does not judge that here."""
    return [None if isinstance(a, ResponseError) else a for a in pipe.execute(raise_on_error=False)]


def _decode(raw: bytes | str) -> str:
    return raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw


class _Auditor:
    def __init__(self, redis: Redis, catalogues: Sequence[Catalogue], expiring: Collection[str]) -> None:
        self.redis = redis
        self.head = f"{keys.prefix()}:"
        self.by_part, self.anywhere = _families(catalogues, self.head)
        self.expiring = frozenset(expiring)
        self.result = KeyAudit()
        self.leftovers: dict[tuple[LeftoverKind, str], Leftover] = {}
        self.runs: dict[str, bool] = {}  # run id -> it exists (run state, or a whole record of old)
        forgotten = cast(list[bytes], redis.zrange(keys.FORGOTTEN, 0, -1))
        self.forgotten = {_decode(m) for m in forgotten}

    def classify(self, key: str) -> tuple[_Family, dict[str, str]] | None:
        rest = key[len(self.head) :]
        for family in (*self.by_part.get(rest.split(":", 1)[0], ()), *self.anywhere):
            match = family.pattern.fullmatch(key)
            if match:
                return family, match.groupdict()
        return None

    def left(
        self,
        kind: LeftoverKind,
        family: str,
        key: str,
        *,
        run_id: str | None = None,
        thread: tuple[str, str, str] | None = None,
    ) -> None:
        found = self.leftovers.get((kind, family))
        if found is None:
            found = self.leftovers[(kind, family)] = Leftover(kind, family, example=key, run_id=run_id, thread=thread)
        found.count += 1

    def batch(self, names: list[str]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for key in names:
            pipe.ttl(key)
        ttls = cast(list[int], pipe.execute())
        runs: list[tuple[str, str, str]] = []  # (key, family, run id): a run's record with no TTL
        messages: list[tuple[str, str, dict[str, str]]] = []
        threads: list[tuple[str, str, dict[str, str]]] = []
        rq_jobs: list[str] = []
        for key, ttl in zip(names, ttls, strict=True):
            if ttl == -2:
                continue  # gone since the SCAN
            self.result.keys += 1
            if key.startswith(RQ_PREFIX):
                self.result.by_owner[RQ] += 1
                if ttl == -1 and key.startswith("rq:job:") and ":" not in key[len("rq:job:") :]:
                    rq_jobs.append(key)
                continue
            if not key.startswith(self.head):
                self.result.by_owner[OTHER] += 1
                continue
            found = self.classify(key)
            if found is None:
                self.result.by_owner[UNOWNED] += 1
                self.left(LeftoverKind.UNOWNED, _shape(key, self.head), key)
                continue
            family, parts = found
            self.result.by_owner[family.owner.value] += 1
            if ttl != -1:
                continue  # it expires by itself
            if family.owner == Owner.MARK:
                self.left(LeftoverKind.MARK, family.name, key)
            elif family.name in self.expiring:
                self.left(LeftoverKind.NO_TTL, family.name, key)
            elif family.owner == Owner.RUN and "run_id" in parts:
                runs.append((key, family.name, parts["run_id"]))
            elif family.owner == Owner.MESSAGE and "channel" in parts and "ts" in parts:
                messages.append((key, family.name, parts))
            elif family.owner == Owner.THREAD and "channel" in parts and "ts" in parts:
                threads.append((key, family.name, parts))
        if messages:
            runs += self._message_runs(messages)
        if threads:
            self._threads(threads)
        if runs:
            self._orphans(runs)
        if rq_jobs:
            self._rq_jobs(rq_jobs)

    def _message_runs(self, messages: list[tuple[str, str, dict[str, str]]]) -> list[tuple[str, str, str]]:
        """A message's records with no TTL, with the run their message is (its message_run record)."""
        pipe = self.redis.pipeline(transaction=False)
        for _, _, parts in messages:
            team = parts.get("team")
            pipe.get(
                keys.message_run(team, parts["channel"], parts["ts"])
                if team is not None
                else keys.legacy_message_run(parts["channel"], parts["ts"])
            )
        found = []
        for (key, name, _), run_id in zip(messages, _answers(pipe), strict=True):
            # No record of the message's run: its run is gone (message_run lives as long as run state).
            found.append((key, name, _decode(run_id) if run_id else ""))
        return found

    def _exist(self, run_ids: Iterable[str]) -> None:
        unknown = [r for r in dict.fromkeys(run_ids) if r and r not in self.runs]
        if not unknown:
            return
        pipe = self.redis.pipeline(transaction=False)
        for run_id in unknown:
            pipe.exists(keys.run_state(run_id), keys.run(run_id))
        for run_id, exists in zip(unknown, pipe.execute(), strict=True):
            self.runs[run_id] = bool(exists)

    def _orphans(self, runs: list[tuple[str, str, str]]) -> None:
        self._exist(run_id for _, _, run_id in runs)
        for key, name, run_id in runs:
            if run_id in self.forgotten or self.runs.get(run_id, False):
                continue  # deleted with its run (or once more shortly, FORGET_AGAIN_SECONDS)
            self.left(LeftoverKind.RUN_ORPHAN, name, key, run_id=run_id or None)

    def _threads(self, threads: list[tuple[str, str, dict[str, str]]]) -> None:
        """A thread's records with no TTL: left over when none of the thread's runs exists."""
        pipe = self.redis.pipeline(transaction=False)
        for _, _, parts in threads:
            team, channel, ts = parts.get("team"), parts["channel"], parts["ts"]
            if team is not None:
                pipe.lrange(keys.thread_runs(team, channel, ts), 0, -1)
            pipe.lrange(keys.legacy_thread_runs(channel, ts), 0, -1)
        lists = iter([answer or [] for answer in _answers(pipe)])
        listed: list[list[str]] = []
        for _, _, parts in threads:
            raw = [*next(lists)] + ([*next(lists)] if parts.get("team") is not None else [])
            listed.append([_decode(i) for i in raw])
        self._exist(i for ids in listed for i in ids)
        for (key, name, parts), run_ids in zip(threads, listed, strict=True):
            if any(self.runs.get(i, False) or i in self.forgotten for i in run_ids):
                continue
            thread = (parts.get("team") or keys.NO_TEAM, parts["channel"], parts["ts"])
            self.left(LeftoverKind.THREAD_ORPHAN, name, key, thread=thread)

    def _rq_jobs(self, names: list[str]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for key in names:
            pipe.hget(key, "status")
        for key, status in zip(names, _answers(pipe), strict=True):
            if status is not None and _decode(status) in _RQ_ENDED:
                self.left(LeftoverKind.RQ_JOB, "rq:job", key)


def audit_keys(
    redis: Redis,
    catalogues: Sequence[Catalogue] = (JOBS_CATALOGUE,),
    *,
    expiring: Collection[str] = JOBS_EXPIRING,
    limit: int = MAX_KEYS,
    count: int = SCAN_COUNT,
) -> KeyAudit:
    """Every key of this Redis database (at most `limit`), classified by the catalogues under the
    current deployment's prefix (jobs.keyspace.keys.configure): counts per owner and the keys left over.
    `expiring`: the families that must hold a TTL whatever their owner. Blocking."""
    auditor = _Auditor(redis, catalogues, expiring)
    cursor: int | bytes = 0
    while True:
        cursor, batch = redis.scan(cursor=int(cursor), count=count)
        names = [_decode(k) for k in batch]
        room = max(0, limit - auditor.result.keys)
        if names[:room]:
            auditor.batch(names[:room])
        if int(cursor) == 0 and len(names) <= room:
            break
        if auditor.result.keys >= limit or len(names) > room:
            auditor.result.complete = False
            break
    auditor.result.total = int(redis.dbsize())
    auditor.result.used_memory = int(cast(dict[str, int], redis.info("memory")).get("used_memory", 0))
    auditor.result.leftovers = list(auditor.leftovers.values())
    return auditor.result
