"""Every model request as it was dispatched, for `deepthread inspect`.

The engine defines the log and keeps it in memory; the Redis version is jobs.records.stores.RedisRequestLog.

Messages are stored once, content-addressed: a step that did not change between two
requests costs nothing more to log, so a 300-turn run logs in O(turns) space, not O(turns²).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, Field

from ..events import utcnow
from ..usage import Usage

STUB_RE = re.compile(r"\[(r_[0-9a-f]+) \| ")
SUMMARY_RE = re.compile(r'^<handoff_notes steps="(\d+)–(\d+)">')


class RequestRecord(BaseModel):
    n: int
    kind: str  # turn, summary, extract
    model: str
    at: datetime = Field(default_factory=utcnow)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    thinking_tokens: int = 0  # of output_tokens
    web_search_requests: int = 0  # server-side searches (the anthropic search provider)
    stop_reason: str | None = None
    error: str | None = None
    seconds: float | None = None  # from asking to the whole answer (retries and waits included)
    stubs: list[str] = Field(default_factory=list)
    summaries: list[str] = Field(default_factory=list)
    budget_block: str = ""
    parts: list[str] = Field(default_factory=list)  # content keys: system, tools, then each message

    @property
    def context_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_creation_tokens

    def usage(self) -> Usage:
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_creation_tokens=self.cache_creation_tokens,
        )


def _key(value: Any) -> tuple[str, str]:
    raw = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(raw.encode()).hexdigest()[:20], raw


def describe(body: dict[str, Any]) -> dict[str, Any]:
    """What `inspect` shows about a request, read off the request itself."""
    stubs: list[str] = []
    summaries: list[str] = []
    budget = ""
    for message in body.get("messages", []):
        content = message["content"]
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                text = block["content"]
                # Checked at both ends only: results can be large, stubs are short.
                match = STUB_RE.match(text) if text.endswith("')]") else None
                if match:
                    stubs.append(match.group(1))
            elif block.get("type") == "text":
                match = SUMMARY_RE.match(block["text"])
                if match:
                    summaries.append(f"steps {match.group(1)}–{match.group(2)}")
                elif block["text"].startswith("<budget>"):
                    budget = block["text"]
    return {"stubs": stubs, "summaries": summaries, "budget_block": budget}


class RequestLog(Protocol):
    async def record(self, record: RequestRecord, body: dict[str, Any]) -> None: ...


class ContentAddressedLog:
    """Shared logic: split a body into parts, store each part once."""

    def __init__(self) -> None:
        self._known: set[str] = set()
        # The projection hands over the same dict objects for unchanged steps: remember their
        # keys by identity so only new or changed parts are serialised (holding a reference
        # keeps an id from being reused by another object).
        self._by_id: dict[int, tuple[Any, str]] = {}

    def _parts(self, body: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        keys: list[str] = []
        new: dict[str, str] = {}
        seen: dict[int, tuple[Any, str]] = {}
        for value in [body.get("system"), body.get("tools"), *body.get("messages", [])]:
            cached = self._by_id.get(id(value))
            if cached is not None and cached[0] is value:
                key = cached[1]
            else:
                key, raw = _key(value)
                if key not in self._known:
                    new[key] = raw
                    self._known.add(key)
            seen[id(value)] = (value, key)
            keys.append(key)
        self._by_id = seen
        return keys, new


class MemoryRequestLog(ContentAddressedLog):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[RequestRecord] = []
        self.parts: dict[str, str] = {}

    async def record(self, record: RequestRecord, body: dict[str, Any]) -> None:
        record.parts, new = self._parts(body)
        self.parts.update(new)
        self.records.append(record)

    def body(self, n: int) -> dict[str, Any]:
        return request_body(self.records[n - 1], self.parts)


def request_body(record: RequestRecord, parts: dict[str, str]) -> dict[str, Any]:
    """A logged request put back together from its content-addressed parts."""
    system, tools, *messages = [json.loads(parts[key]) for key in record.parts]
    return {"model": record.model, "system": system, "tools": tools, "messages": messages}
