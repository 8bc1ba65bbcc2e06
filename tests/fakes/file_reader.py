"""Scripted small-model answers for the thread tools: file extraction and passage ranking.

They read the request as the model would: the goal and the <file> text, or the query and the
numbered passages. `gullible_extract` obeys whatever the file tells it, to show that what a
file says cannot get past verification.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tests.fakes.anthropic import Reply, text_reply, tool_reply
from tests.fakes.policies import ResearchPolicy, _system_text, _text, extract, is_extraction

SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in re.findall(r"\w{4,}", text.lower())}


def is_file_extraction(request: dict[str, Any]) -> bool:
    return "You read one file shared in a Slack thread" in _system_text(request)


def is_ranking(request: dict[str, Any]) -> bool:
    return "You rank passages" in _system_text(request)


def extract_file(request: dict[str, Any]) -> Reply:
    """Lines and sentences of the file sharing words with the goal, copied verbatim."""
    prompt = _text(request["messages"][-1])
    goal = re.search(r"<goal>(.*?)</goal>", prompt, re.DOTALL)
    body = re.search(r"<file[^>]*>\n(.*)\n</file>", prompt, re.DOTALL)
    wanted = _words(goal.group(1) if goal else "")
    pieces = [p.strip() for p in SENTENCE_END.split(body.group(1) if body else "") if p.strip()]
    picked = [p for p in pieces if len(wanted & _words(p)) >= 2 and not p.startswith("[")][:4]
    return text_reply(json.dumps({"relevance": "high" if picked else "none", "judgement": "Scripted file reading.",
                                  "excerpts": picked}))


def gullible_extract(request: dict[str, Any]) -> Reply:
    """A reader that does what the file says: it rewrites the file's figure to the one the file dictates."""
    prompt = _text(request["messages"][-1])
    dictated = re.search(r"fee is ([\d.]+)%", prompt)
    excerpts = [f"The SCHB expense ratio was {dictated.group(1)} percent in 2024."] if dictated else []
    return text_reply(json.dumps({"relevance": "high", "judgement": "As instructed by the file.", "excerpts": excerpts}))


def rank(request: dict[str, Any]) -> Reply:
    """Passages by how many of the query's words they hold; those holding fewer than two are left out."""
    prompt = _text(request["messages"][-1])
    query = re.search(r"<query>(.*?)</query>", prompt, re.DOTALL)
    wanted = _words(query.group(1) if query else "")
    scored = []
    for number, body in re.findall(r'<passage n="(\d+)"[^>]*>\n(.*?)\n</passage>', prompt, re.DOTALL):
        overlap = len(wanted & _words(body))
        if overlap >= 2:
            scored.append((overlap, int(number)))
    return text_reply(json.dumps({"ranked": [n for _, n in sorted(scored, key=lambda s: (-s[0], s[1]))]}))


class ThreadPolicy:
    """File extraction and ranking scripted as above; anything else goes to the research policy."""

    def __init__(self, extractor: Any = extract_file) -> None:
        self.extractor = extractor
        self.research = ResearchPolicy()

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_file_extraction(request):
            return self.extractor(request)
        if is_ranking(request):
            return rank(request)
        return self.research(request)


MAX_WAITING_TURNS = 40


class FilesPolicy:
    """Reads every file the opening lists, writes one section citing each, then answers."""

    def __init__(self, on_turn_two: Callable[[], object] | None = None, search_after: bool = False) -> None:
        self.on_turn_two = on_turn_two  # e.g. someone shares a file while the run works
        self.search_after = search_after  # one more turn, so a file shared meanwhile is announced
        self.turn = 0

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_file_extraction(request):
            return extract_file(request)
        if is_ranking(request):
            return rank(request)
        if is_extraction(request):
            return extract(request)
        self.turn += 1
        opening = _text(request["messages"][0])
        if self.turn == 1:
            ids = re.findall(r"^- (F\d+) · ", opening, re.M)
            return tool_reply(*[("read_file", {"file": i, "goal": "SCHB expense ratio 2024"}) for i in ids])
        if self.turn == 2:
            if self.on_turn_two is not None:
                self.on_turn_two()
            last = _text(request["messages"][-1])
            markers = list(dict.fromkeys(re.findall(r"\[s\d+\]", last)))
            body = f"SCHB's expense ratio was 0.03% in 2024 {''.join(markers)}."
            return tool_reply(("write_section", {"title": "SCHB fees", "body": body}))
        announced = "New in the thread since your last turn" in _text(request["messages"][-1])
        if self.search_after and self.turn >= 3 and not announced and self.turn < MAX_WAITING_TURNS:
            # Keep working until the file shared meanwhile is announced (a thread is re-read every few seconds).
            return tool_reply(("web_search", {"query": f"schb expense ratio angle {self.turn}"}))
        return text_reply("<summary>SCHB charged 0.03% in 2024.</summary>")
