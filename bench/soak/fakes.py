"""The soak's fakes: Slack, the model and the web with a production's delays and occasional 429s
and 529s, each answer recorded with its time so progress after a fault can be measured.

Every run's question carries its tag (`soak-q017`): a model request, and a Slack update of the
run's messages, are attributed to the run by it."""
from __future__ import annotations

import asyncio
import json
import random
import re
import threading
import time
from collections import defaultdict
from typing import Any

from aiohttp import web

from tests.fakes.anthropic import FakeAnthropic, Reply, tool_reply
from tests.fakes.file_reader import extract_file, is_file_extraction, is_ranking, rank
from tests.fakes.policies import (
    MARKER,
    URL,
    PlanFirstPolicy,
    ResearchPolicy,
    _text,
    is_planning,
    question_of,
    side_reply,
    turn_of,
)
from tests.fakes.slack import FakeSlack, _read_params

TAG = re.compile(r"soak-q(\d{3,})")
# Chance of an occasional throttle on any one answer (outside the chaos schedule's own faults).
MODEL_OVERLOADED_CHANCE = 0.01  # 529 overloaded_error
MODEL_LIMITED_CHANCE = 0.01  # 429 rate_limit_error, retry-after 1 s
SLACK_LIMITED_CHANCE = 0.005  # 429 ratelimited, Retry-After 1 s
# A Slack Web API call takes 30–150 ms from a data centre; a model turn seconds.
SLACK_DELAY_SECONDS = (0.03, 0.15)
EXTRACTION_DELAY_SECONDS = (0.2, 0.8)


def tag_of(text: str) -> int | None:
    match = TAG.search(text)
    return int(match.group(1)) if match else None


class SoakPolicy:
    """Each run researches for its own number of turns, decided from its tag (so a run resumed on
    another worker goes on where its history left it): search, read the top result, write a section,
    and again; files first when the opening lists any; a plan when asked for one. Once `finish` is set
    (the soak is draining) every run answers at its next turn."""

    def __init__(self, turns: tuple[int, int], seed: int) -> None:
        self.turns = turns
        self.seed = seed
        self.finish = threading.Event()
        self._plans = PlanFirstPolicy()

    def turns_of(self, tag: int) -> int:
        low, high = self.turns
        return random.Random(self.seed * 100_003 + tag).randint(low, high)

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_file_extraction(request):
            return extract_file(request)
        if is_ranking(request):
            return rank(request)
        if is_planning(request):
            return self._plans(request)
        side = side_reply(request)
        if side is not None:
            return side
        messages = request["messages"]
        question, turn = question_of(request), turn_of(request)
        tag = tag_of(question) or 0
        forced = (request.get("tool_choice") or {}).get("type") == "none" or "FINAL TURN" in _text(messages[-1])
        if forced or self.finish.is_set() or turn >= self.turns_of(tag):
            return ResearchPolicy().final(messages)
        opening = _text(messages[0])
        files = re.findall(r"^- (F\d+) · ", opening, re.M)
        if turn == 1 and files:
            return tool_reply(*[("read_file", {"file": f, "goal": "expense ratio VTI SCHB"}) for f in files])
        last = _text(messages[-1])
        previous = [b["name"] for b in messages[-2]["content"] if isinstance(b, dict) and b.get("type") == "tool_use"] \
            if len(messages) > 1 and isinstance(messages[-2]["content"], list) else []
        if previous[:1] == ["web_search"]:
            urls = URL.findall(last)[:1]
            if urls:
                return tool_reply(("read_page", {"url": urls[0], "goal": "expense ratio of the fund"}))
        excerpts = re.findall(r'(\[s\d+\]) "([^"]+)"', last)
        if previous[:1] in (["read_page"], ["read_file"]) and excerpts:
            body = "\n".join(f"- {text} {marker}" for marker, text in excerpts[:2])
            return tool_reply(("write_section", {"title": f"Finding at turn {turn}", "body": body}))
        seen = MARKER.findall(json.dumps(messages))
        if turn % 7 == 0 and seen:
            return tool_reply(("calculator", {"expression": f"{turn} * 0.03"}))
        return tool_reply(("web_search", {"query": f"expense ratio VTI SCHB angle {turn}"}))


class SoakModel(FakeAnthropic):
    """The fake model with a turn's delay and occasional throttles; records, per run tag, when each
    request was answered and how (status), for progress and requests per run."""

    def __init__(self, policy: SoakPolicy, *, turn_seconds: tuple[float, float], seed: int) -> None:
        super().__init__(policy)
        self.turn_seconds = turn_seconds
        self._random = random.Random(seed)
        self._record_lock = threading.Lock()
        self.answers: dict[int, list[tuple[float, int]]] = defaultdict(list)  # tag -> [(monotonic, status)]
        self.total = 0

    def _tag(self, body: dict[str, Any]) -> int | None:
        messages = body.get("messages") or []
        if not messages:
            return None
        return tag_of(_text(messages[0]) if isinstance(messages[0], dict) else "")

    async def answer(self, request: web.Request, body: dict[str, Any], **kwargs: Any) -> web.StreamResponse:
        side = not body.get("tools") or "You read one" in json.dumps(body.get("system", ""))[:2000]
        low, high = EXTRACTION_DELAY_SECONDS if side else self.turn_seconds
        await asyncio.sleep(self._random.uniform(low, high))
        roll = self._random.random()
        if roll < MODEL_OVERLOADED_CHANCE:
            response: web.StreamResponse = _error(529, "overloaded_error", "Overloaded", {})
        elif roll < MODEL_OVERLOADED_CHANCE + MODEL_LIMITED_CHANCE:
            response = _error(429, "rate_limit_error", "This request would exceed your organization's rate limit.",
                              {"retry-after": "1"})
        else:
            response = await super().answer(request, body, **kwargs)
        tag = self._tag(body)
        with self._record_lock:
            self.total += 1
            if tag is not None:
                self.answers[tag].append((time.monotonic(), response.status))
        return response

    def forget_bodies(self) -> None:
        """The fake keeps every request body; a soak of thousands would hold them all, so drop them."""
        with self._lock:
            self._requests.clear()
            self._responses.clear()


def _error(status: int, error_type: str, message: str, headers: dict[str, str]) -> web.Response:
    from tests.fakes.anthropic import _error as api_error  # the API's own error shape

    return api_error(status, error_type, message, headers)


class SoakSlack(FakeSlack):
    """The fake Slack with a call's delay and an occasional 429; records when each update of a message
    succeeded (channel, ts) and every call's method, for progress after a fault and calls per run."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self._random = random.Random(seed + 1)
        self._record_lock = threading.Lock()
        self.updates: dict[tuple[str, str], list[float]] = defaultdict(list)  # (channel, ts) -> [monotonic]
        self.methods: dict[str, int] = defaultdict(int)
        self.limited = 0

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        await asyncio.sleep(self._random.uniform(*SLACK_DELAY_SECONDS))
        if self._random.random() < SLACK_LIMITED_CHANCE and method not in ("auth.test", "apps.connections.open"):
            with self._record_lock:
                self.limited += 1
                self.methods[method] += 1
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": "1"})
        response = await super()._handle_api(request)
        with self._record_lock:
            self.methods[method] += 1
        if method in ("chat.update", "chat.appendStream", "chat.stopStream") \
                and response.status == 200 and b'"ok": true' in (response.body or b"")[:20]:
            params = await _read_params(request)
            channel, ts = str(params.get("channel", "")), str(params.get("ts", ""))
            with self._record_lock:
                self.updates[(channel, ts)].append(time.monotonic())
        return response
