"""The team's library: every finished report, indexed in Redis so every serve and worker host finds it.

One owner: this module alone writes the library's keys (jobs/keyspace/keys.py `library_*`). A
report is shelved by its run (the thread's newest run carries the report all its runs share, so
shelving it takes the thread's earlier runs off the shelf) and goes with its run: retention's rule
for `library_doc` calls `unshelve`, so a forget, a deleted message, channel or workspace and the
maintenance round take a report out of the index with the rest of its run.

The index is a workspace's: per word, one Redis string of fixed-width postings (report number,
the word's count in the report, the report's length; 8 bytes each), so a word found in 5,000
reports is one GET of 40 KB. Shelving and unshelving are one Lua script each, atomic: two serve
replicas shelving the same report, or a forget racing a shelve, leave one report or none, never
half of one. Search scores at query time, BM25 over the words' best forms (library_terms.py); who
may see a report is not stored at all: the bot decides it at read time, for the person asking,
from Slack (bot/slack/readers.py).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from pydantic import BaseModel, Field
from redis import Redis

from agent import assemble

from ..keyspace import keys
from ..keyspace.connection import text
from .library_terms import bag, detect_code, query_words
from .models import RunState
from .store import RUN_TTL_SECONDS

__all__ = ["Library", "LibraryEntry", "LibrarySource", "unshelve_run"]

# A posting: report number (uint32), the word's count in it and the report's length (uint16 each).
POSTING = struct.Struct("<IHH")
_RECORD = [("num", "<u4"), ("count", "<u2"), ("length", "<u2")]  # the same, as numpy reads a posting list
_COUNT_CAP = 0xFFFF
# BM25's usual constants: how fast a word's count saturates, and how much a long report is discounted.
K1, B = 1.2, 0.75
# How much more a word counts in the title or question, and in a heading, than in a sentence.
TITLE_WEIGHT, HEADING_WEIGHT = 3, 2
# What a library entry keeps to show (search results, earlier_research): never the whole report.
SUMMARY_CHARS = 700
SOURCES_KEPT = 40
SOURCE_TITLE_CHARS = 160
HEADINGS_KEPT = 40
# Reports scored best that one search reads back; the bot keeps those the asker may see, and asks for
# the next ones when too few are left.
CANDIDATES = 50
# Library entries whose run is gone, looked at per sweep (the maintenance round's turn).
SWEEP_BATCH = 500

# Takes a report out of the index: its postings, its number, its words from the totals, its hash.
_UNSHELVE = """
local function drop(key, num)
  local s = redis.call('GET', key)
  if not s then return end
  local at = 1
  while true do
    local i = string.find(s, num, at, true)
    if not i then return end
    if (i - 1) % 8 == 0 then
      s = string.sub(s, 1, i - 1) .. string.sub(s, i + 8)
      if #s == 0 then redis.call('DEL', key) else redis.call('SET', key, s) end
      return
    end
    at = i + 1
  end
end
local function unshelve(doc)
  local f = redis.call('HMGET', doc, 'num', 'head', 'terms', 'length', 'docs', 'stats')
  if not f[1] then return 0 end
  for term in string.gmatch(f[3] or '', '%S+') do drop(f[2] .. term, f[1]) end
  redis.call('HDEL', f[5], tostring(struct.unpack('<I4', f[1])))
  redis.call('HINCRBY', f[6], 'length', -tonumber(f[4] or '0'))
  redis.call('DEL', doc)
  return 1
end
"""

# KEYS: the report's hash, the workspace's docs hash and stats hash, the run's state, then the hashes of
# the thread's other runs to take off the shelf. ARGV: the postings' key head, the report's length, its
# TTL, the number of field/value pairs and the pairs, then term/suffix pairs (suffix: count and length,
# packed). A run whose state is gone (forgotten while its report was being shelved) is not shelved.
_SHELVE = (
    _UNSHELVE
    + """
if redis.call('EXISTS', KEYS[4]) == 0 then return 0 end
for i = 5, #KEYS do unshelve(KEYS[i]) end
unshelve(KEYS[1])
local num = struct.pack('<I4', redis.call('HINCRBY', KEYS[3], 'next', 1))
redis.call('HINCRBY', KEYS[3], 'length', tonumber(ARGV[2]))
local i = 4
local n = tonumber(ARGV[i]); i = i + 1
local terms = {}
for _ = 1, n do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]); i = i + 2 end
while i < #ARGV do
  redis.call('APPEND', ARGV[1] .. ARGV[i], num .. ARGV[i + 1])
  terms[#terms + 1] = ARGV[i]
  i = i + 2
end
redis.call('HSET', KEYS[1], 'num', num, 'head', ARGV[1], 'terms', table.concat(terms, ' '),
           'length', ARGV[2], 'docs', KEYS[2], 'stats', KEYS[3])
redis.call('HSET', KEYS[2], tostring(struct.unpack('<I4', num)), redis.call('HGET', KEYS[1], 'run'))
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"""
)

_REMOVE = _UNSHELVE + "\nreturn unshelve(KEYS[1])\n"

# The fields a search reads back of each report.
_SHOWN = ("run", "team", "channel", "thread", "asker", "date", "permalink", "title", "summary", "sources", "headings")


class LibrarySource(BaseModel):
    url: str
    title: str = ""


class LibraryEntry(BaseModel):
    """A report on the library's shelf, as a search shows it (never its whole text)."""

    run_id: str
    team: str | None = None
    channel: str = ""
    thread_ts: str = ""
    asker: str = ""
    date: datetime
    permalink: str = ""
    title: str
    summary: str = ""
    sources: list[LibrarySource] = Field(default_factory=list)
    headings: list[str] = Field(default_factory=list)
    score: float = 0.0


def _short(value: str, limit: int) -> str:
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1].rstrip() + "…"


def title_of(state: RunState) -> str:
    """What the library calls a report: its question (the thread's first), in one line."""
    return _short(state.run.question, 200)


class Library:
    """The team's library in one Redis (blocking calls: the bot runs them in a thread)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._shelve = redis.register_script(_SHELVE)
        self._remove = redis.register_script(_REMOVE)

    # --- shelving -------------------------------------------------------------------------

    def shelved_version(self, run_id: str) -> int | None:
        """The run-state version its report was shelved at, or None when it is not on the shelf."""
        raw = self.redis.hget(keys.library_doc(run_id), "version")
        return int(text(raw)) if raw else None

    def shelve(self, state: RunState, permalink: str, *, replaces: Iterable[str] = ()) -> bool:
        """Index a finished run's report (again, when it changed since), taking the runs in `replaces`
        (the thread's earlier runs, whose report this one carries on) off the shelf. False when the run
        has no report to keep (no section and no summary), has not finished, or is gone (forgotten)."""
        if not state.status.finished or not (state.sections or state.summary.strip()):
            return False
        run = state.run
        report = assemble(state.summary, state.sections, state.sources, private_allowed=run.cites_private)
        headings = [section.title for section, _ in report.sections][:HEADINGS_KEPT]
        sources = [
            LibrarySource(url=note.source.url, title=_short(note.source.title, SOURCE_TITLE_CHARS))
            for note in report.footnotes[:SOURCES_KEPT]
            if note.source.url.startswith(("http://", "https://"))
        ]
        title = title_of(state)
        code = detect_code(" ".join([run.question, state.summary, *headings]))
        counts = bag(
            [
                (title, TITLE_WEIGHT),
                (run.follow_up or "", TITLE_WEIGHT),
                *((c, 1) for c in run.constraints),
                *((h, HEADING_WEIGHT) for h in headings),
                (report.summary, 1),
                *((body, 1) for _, body in report.sections),
                *((s.title, 1) for s in sources),
            ],
            code,
        )
        length = min(sum(counts.values()), _COUNT_CAP)
        when = state.finished_at or state.updated_at
        fields: dict[str, str] = {
            "run": run.id,
            "team": run.team or "",
            "channel": run.channel or "",
            "thread": run.thread_ts or "",
            "asker": run.requester or "",
            "date": when.astimezone(UTC).isoformat(),
            "permalink": permalink,
            "title": title,
            "question": run.question,
            "constraints": json.dumps(run.constraints),
            "summary": _short(report.summary, SUMMARY_CHARS),
            "sources": json.dumps([s.model_dump() for s in sources]),
            "headings": json.dumps(headings),
            "lang": code,
            "version": str(state.version),
        }
        args: list[Any] = [
            keys.library_term(run.team, ""),
            length,
            RUN_TTL_SECONDS + keys.LIBRARY_GRACE_SECONDS,
            len(fields),
        ]
        for name, value in fields.items():
            args += [name, value]
        for term, count in counts.items():
            args += [term, POSTING.pack(0, min(count, _COUNT_CAP), length)[4:]]
        others = [keys.library_doc(r) for r in dict.fromkeys(replaces) if r != run.id]
        shelved = self._shelve(
            keys=[
                keys.library_doc(run.id),
                keys.library_docs(run.team),
                keys.library_stats(run.team),
                keys.run_state(run.id),
                *others,
            ],
            args=args,
        )
        return bool(shelved)

    def unshelve(self, run_id: str) -> bool:
        """Take a run's report out of the library (its index entries too); False when it was not there."""
        return bool(self._remove(keys=[keys.library_doc(run_id)], args=[]))

    def sweep(self, limit: int = SWEEP_BATCH) -> int:
        """Take off the shelf reports whose run is gone without a forget (its state expired by its TTL);
        returns how many. The maintenance round calls it on its turn."""
        head = keys.library_doc("")
        found: list[str] = []
        for raw in self.redis.scan_iter(match=keys.library_doc("*"), count=1000):
            found.append(text(raw).removeprefix(head))
            if len(found) >= limit:
                break
        if not found:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for run_id in found:
            pipe.exists(keys.run_state(run_id))
        gone = [run_id for run_id, alive in zip(found, pipe.execute(), strict=True) if not alive]
        return sum(self.unshelve(run_id) for run_id in gone)

    # --- searching ------------------------------------------------------------------------

    def size(self, team: str | None) -> int:
        """How many reports the workspace's library holds."""
        return int(self.redis.hlen(keys.library_docs(team)))

    def search(self, team: str | None, query: str, *, limit: int = CANDIDATES, offset: int = 0) -> list[LibraryEntry]:
        """The workspace's reports that best match `query`, best first: the `limit` after the first
        `offset`. Every report is scored, whoever may see it (the bot keeps the ones the asker may)."""
        ranked = self.rank(team, query)
        return self._entries(team, ranked[offset : offset + limit])

    def rank(self, team: str | None, query: str) -> list[tuple[int, float]]:
        """(report number, BM25 score) of every report matching a word of `query`, best first."""
        import numpy as np  # the serve process loads it on its first search, not at start

        words = query_words(query)
        if not words:
            return []
        forms = list(dict.fromkeys(form for word in words for form in word))
        pipe = self.redis.pipeline(transaction=False)
        pipe.hlen(keys.library_docs(team))
        pipe.hget(keys.library_stats(team), "length")
        for form in forms:
            pipe.get(keys.library_term(team, form))
        answers = pipe.execute()
        total = int(answers[0] or 0)
        if total == 0:
            return []
        postings = dict(zip(forms, answers[2:], strict=True))
        average = max(1.0, int(text(answers[1] or b"0")) / total)
        numbers, scores = [], []
        for word in words:
            word_numbers, word_scores = [], []
            for form in word:
                raw = cast(bytes | None, postings.get(form))
                if not raw:
                    continue
                records = np.frombuffer(raw, dtype=_RECORD, count=len(raw) // POSTING.size)
                found = len(records)
                idf = math.log(1 + (total - found + 0.5) / (found + 0.5))
                count = records["count"].astype(np.float64)
                norm = K1 * (1 - B + B * records["length"].astype(np.float64) / average)
                word_numbers.append(records["num"])
                word_scores.append(idf * count * (K1 + 1) / (count + norm))
            if not word_numbers:
                continue
            # A report matches a word by its best form (a report is stemmed in one language).
            nums, best = np.concatenate(word_numbers), np.concatenate(word_scores)
            order = np.lexsort((-best, nums))
            nums, best = nums[order], best[order]
            first = np.ones(len(nums), dtype=bool)
            first[1:] = nums[1:] != nums[:-1]
            numbers.append(nums[first])
            scores.append(best[first])
        if not numbers:
            return []
        unique, inverse = np.unique(np.concatenate(numbers), return_inverse=True)
        totals = np.bincount(inverse, weights=np.concatenate(scores))
        order = np.argsort(-totals, kind="stable")
        return [(int(unique[i]), float(totals[i])) for i in order]

    def entry(self, run_id: str) -> LibraryEntry | None:
        """One report on the shelf, by its run."""
        raw = self.redis.hmget(keys.library_doc(run_id), list(_SHOWN))
        return _entry(raw, 0.0)

    def _entries(self, team: str | None, ranked: list[tuple[int, float]]) -> list[LibraryEntry]:
        if not ranked:
            return []
        run_ids = self.redis.hmget(keys.library_docs(team), [str(num) for num, _ in ranked])
        pipe = self.redis.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hmget(keys.library_doc(text(run_id) if run_id else "-"), list(_SHOWN))
        entries = []
        for (_, score), raw in zip(ranked, pipe.execute(), strict=True):
            entry = _entry(raw, score)
            if entry is not None and entry.team == (team or None):
                entries.append(entry)
        return entries


def _entry(raw: list[Any], score: float) -> LibraryEntry | None:
    if not raw or raw[0] is None:
        return None  # a report taken off the shelf between the index read and this one
    values = dict(zip(_SHOWN, (text(v) if v is not None else "" for v in raw), strict=True))
    try:
        return LibraryEntry(
            run_id=values["run"],
            team=values["team"] or None,
            channel=values["channel"],
            thread_ts=values["thread"],
            asker=values["asker"],
            date=datetime.fromisoformat(values["date"]),
            permalink=values["permalink"],
            title=values["title"],
            summary=values["summary"],
            sources=[LibrarySource.model_validate(s) for s in json.loads(values["sources"] or "[]")],
            headings=list(json.loads(values["headings"] or "[]")),
            score=score,
        )
    except ValueError:  # a damaged entry is skipped, never fatal to a search
        return None


class _NamesRun(Protocol):
    @property
    def run_id(self) -> str: ...


def unshelve_run(redis: Redis, subject: _NamesRun) -> int:
    """Retention's delete for `library_doc` (jobs/upkeep/retention.py, whose Subject names the run):
    1 when the run's report was on the shelf."""
    return int(Library(redis).unshelve(subject.run_id))
