"""Verdicts on finished reports: one per person per run (a second click changes it), with the
note a 👎 is asked for, and which sections (and their revisions) the person was rating.

Kept in a hash named by the run (`keys.feedback`), so it goes with the run (jobs/upkeep/retention.py),
and written only while the run's state exists, with the run's own time to live: a click that lands
after the run was forgotten (or a run that expired before the maintenance round reached it) leaves
no verdict behind it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, ValidationError
from redis import Redis

from agent import utcnow

from ..keyspace import keys
from .store import RUN_TTL_SECONDS

__all__ = ["REASONS", "FeedbackStore", "Tally", "Verdict"]

Kind = Literal["helpful", "unhelpful"]
# The short choice a 👎 is asked for (value → label shown in Slack).
REASONS: dict[str, str] = {
    "wrong_figure": "A wrong figure",
    "missing_source": "A missing source",
    "off_question": "Off the question",
    "outdated": "Outdated",
    "other": "Something else",
}
NOTE_CHARS = 500  # a "free line": longer notes are cut, so one person cannot fill the run's record

# KEYS: run state, feedback. ARGV: user, verdict JSON, the fallback TTL (s). The verdict lives as long
# as the run does, and not at all once the run is gone. Sent whole (EVAL): no script cache to miss
# after a failover.
_RECORD = """
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) else redis.call('EXPIRE', KEYS[2], ARGV[3]) end
return 1
"""


class Verdict(BaseModel):
    user: str
    verdict: Kind
    at: datetime
    sections: dict[str, int] = Field(default_factory=dict)  # section id → its revision count then
    reason: str | None = None
    note: str = ""
    # Where the report was rated, as Slack said then: only a public channel's question may leave it.
    where: Literal["public", "private", "direct"] = "private"


class Tally(BaseModel):
    rated: int = 0  # reports with at least one verdict
    helpful: int = 0  # of those, reports whose verdicts are mostly 👍

    @property
    def share(self) -> float | None:
        return self.helpful / self.rated if self.rated else None


class FeedbackStore:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    def record(
        self, run_id: str, user: str, verdict: Kind, sections: Mapping[str, int], where: str = "private"
    ) -> bool:
        """Set `user`'s verdict on the run; True when it is new or changed (a re-click of the same
        button is no new verdict; nothing is written for a run that is gone). A changed verdict drops the
        note given for the old one."""
        old = self.verdict(run_id, user)
        if old is not None and old.verdict == verdict:
            return False
        new = Verdict(
            user=user,
            verdict=verdict,
            at=utcnow(),
            sections=dict(sections),
            where=where if where in ("public", "direct") else "private",  # type: ignore[arg-type]
        )
        return self._write(run_id, user, new)

    def _write(self, run_id: str, user: str, verdict: Verdict) -> bool:
        """False when the run is gone: nothing is written."""
        written = self._redis.eval(
            _RECORD, 2, keys.run_state(run_id), keys.feedback(run_id), user, verdict.model_dump_json(), RUN_TTL_SECONDS
        )
        return bool(written)

    def note(self, run_id: str, user: str, reason: str | None, note: str) -> Verdict | None:
        """The reason and free line of `user`'s 👎; None when they have no 👎 on this run."""
        old = self.verdict(run_id, user)
        if old is None or old.verdict != "unhelpful":
            return None
        updated = old.model_copy(
            update={"reason": reason if reason in REASONS else None, "note": " ".join(note.split())[:NOTE_CHARS]}
        )
        return updated if self._write(run_id, user, updated) else None

    def verdict(self, run_id: str, user: str) -> Verdict | None:
        raw = self._redis.hget(keys.feedback(run_id), user)
        return _parse(raw) if raw is not None else None

    def verdicts(self, run_id: str) -> list[Verdict]:
        values = self._redis.hvals(keys.feedback(run_id))
        return [v for v in (_parse(raw) for raw in values) if v is not None]

    def tally(self, run_ids: Iterable[str]) -> Tally:
        out = Tally()
        for run_id in run_ids:
            verdicts = self.verdicts(run_id)
            if not verdicts:
                continue
            out.rated += 1
            up = sum(v.verdict == "helpful" for v in verdicts)
            out.helpful += up * 2 > len(verdicts)
        return out

    def rated_runs(self) -> Iterator[str]:
        """Every run of this deployment with a verdict (for the eval export)."""
        head, tail = keys.feedback("*").split("*")
        for key in self._redis.scan_iter(match=keys.feedback("*"), count=500):
            name = key.decode() if isinstance(key, bytes) else str(key)
            yield name[len(head) : len(name) - len(tail)]


def _parse(raw: bytes | str) -> Verdict | None:
    try:
        return Verdict.model_validate(json.loads(raw))
    except (ValueError, ValidationError):
        return None
