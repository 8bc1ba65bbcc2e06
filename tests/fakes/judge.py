"""A scripted judge behind the fake Messages API: it reads the eval's judge prompts and grades
by word and figure overlap, the way a literal-minded grader would.

- citation support: a sentence whose figures all appear in its passages and most of whose
  words do is "supported"; some overlap is "partly"; little is "not_supported";
- facts: "stated" when the fact's figures and most of its words appear in the report;
- rubric: fixed scores (report 6, reference 8 on every criterion).

`invalid_answers` makes it answer that many times with prose instead of JSON first.
"""
from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

from tests.fakes.anthropic import Reply, text_reply
from tests.fakes.policies import _system_text, _text

SUPPORTED_SHARE = 0.6
PARTLY_SHARE = 0.3
REPORT_SCORE = 6
REFERENCE_SCORE = 8
RUBRIC = ("comprehensiveness", "depth", "instruction_following", "readability")
_STOP = {"that", "this", "with", "from", "have", "which", "their", "there", "about", "were", "been", "into", "than",
         "also", "each", "what", "when", "does", "over", "more"}
_ITEM = re.compile(r'<item n="(\d+)">\n<sentence>(.*?)</sentence>\n(.*?)</item>', re.DOTALL)
_PASSAGE = re.compile(r"<passage [^>]*>\n(.*?)\n</passage>", re.DOTALL)
_FIGURE = re.compile(r"\d[\d,]*(?:\.\d+)?")
_MARKER = re.compile(r"\[s\d+\]")


def is_judge(request: dict[str, Any]) -> bool:
    return _system_text(request).startswith("You grade research reports")


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]{4,}", text.lower()) if w not in _STOP}


def _figures(text: str) -> set[str]:
    return {f.replace(",", "").rstrip("0").rstrip(".") if "." in f else f.replace(",", "")
            for f in _FIGURE.findall(_MARKER.sub(" ", text))}


def _share(claim: str, evidence: str) -> float:
    words = _words(claim)
    return len(words & _words(evidence)) / len(words) if words else 1.0


def support(sentence: str, evidence: str) -> str:
    share = _share(_MARKER.sub(" ", sentence), evidence)
    figures_found = _figures(sentence) <= _figures(evidence)
    if share >= SUPPORTED_SHARE and figures_found:
        return "supported"
    return "partly" if share >= PARTLY_SHARE or (share >= SUPPORTED_SHARE and not figures_found) else "not_supported"


class JudgePolicy:
    def __init__(self, invalid_answers: int = 0) -> None:
        self.invalid_answers = invalid_answers
        self.kinds: list[str] = []  # "citations", "facts", "rubric", in the order asked
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        prompt = _text(request["messages"][0])
        kind = "citations" if "<items>" in prompt else "facts" if "<facts>" in prompt else "rubric"
        with self._lock:
            self.kinds.append(kind)
            if self.invalid_answers > 0:
                self.invalid_answers -= 1
                return text_reply("I think the report is mostly fine.")
        if kind == "citations":
            verdicts = []
            for n, sentence, passages in _ITEM.findall(prompt):
                evidence = " ".join(_PASSAGE.findall(passages))
                verdict = support(sentence, evidence)
                verdicts.append({"n": int(n), "verdict": verdict, "why": f"scripted: {verdict} by word overlap"})
            return text_reply(json.dumps({"verdicts": verdicts}))
        if kind == "facts":
            report = re.search(r"<report>\n(.*?)\n</report>", prompt, re.DOTALL)
            facts = re.findall(r"^(\d+)\. (.*)$", re.search(r"<facts>\n(.*?)\n</facts>", prompt, re.DOTALL).group(1), re.MULTILINE)  # type: ignore[union-attr]
            text = report.group(1) if report else ""
            answers = [{"n": int(n), "verdict": "stated" if _share(f, text) >= SUPPORTED_SHARE and _figures(f) <= _figures(text)
                        else "missing"} for n, f in facts]
            return text_reply(json.dumps({"facts": answers}))
        scores = lambda v: {name: v for name in RUBRIC}
        return text_reply(json.dumps({"report": scores(REPORT_SCORE), "reference": scores(REFERENCE_SCORE),
                                      "notes": "scripted"}))


def with_judge(research: Callable[[dict[str, Any]], Reply], judge: JudgePolicy) -> Callable[[dict[str, Any]], Reply]:
    """One policy for the fake: judge prompts go to the judge, everything else to `research`."""
    return lambda request: judge(request) if is_judge(request) else research(request)
