"""Scripted model policies: they read the request like a model would and answer with tools.

The research policy is stateless: it decides from the conversation it is sent, so it
works the same whether the loop runs in-process or in a worker subprocess.
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.fakes.anthropic import FakeAPIError, Reply, text_reply, tool_reply

MARKER = re.compile(r"\[s\d+\]")
URL = re.compile(r"^\s+(https?://\S+)$", re.M)
# A sentence ends at . ! or ? followed by whitespace, so "0.03%" stays whole.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _text(message: dict[str, Any]) -> str:
    parts = []
    for block in _blocks(message):
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "tool_result":
            content = block.get("content", "")
            parts.append(content if isinstance(content, str) else " ".join(c.get("text", "") for c in content))
    return "\n".join(parts)


def _system_text(request: dict[str, Any]) -> str:
    system = request.get("system", "")
    return system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)


def is_constraints(request: dict[str, Any]) -> bool:
    """The small model's constraints pass at the start of a run (agent/prompts/constraints.md)."""
    return "the constraints it states" in " ".join(_system_text(request).split())


def is_claim_check(request: dict[str, Any]) -> bool:
    """The small model judging a section's cited claims (agent/prompts/claim_check.md)."""
    return _system_text(request).startswith("You check claims")


CLAIM_ITEM = re.compile(r'<claim n="(\d+)">')


def claim_verdicts(request: dict[str, Any], verdict: str = "supported") -> Reply:
    """The judge's answer: `verdict` for every claim it was sent (the scripted judge trusts the rules'
    anchor; tests that need another answer script one of their own)."""
    numbers = [int(n) for n in CLAIM_ITEM.findall(_text(request["messages"][-1]))]
    differs = "" if verdict == "supported" else "scripted: the source says something else"
    return text_reply(json.dumps({"verdicts": [{"n": n, "verdict": verdict, "differs": differs} for n in numbers]}))


def is_extraction(request: dict[str, Any]) -> bool:
    """A small-model side request (page reading, the constraints pass, the claim check), not a turn of the loop."""
    return "You read one web page" in _system_text(request) or is_constraints(request) or is_claim_check(request)


def question_of(request: dict[str, Any]) -> str:
    first = _text(request["messages"][0])
    match = re.search(r"<task>\n(.*?)\n</task>", first, re.S)
    return match.group(1) if match else first


def extract(request: dict[str, Any], *, fabricate: bool = False) -> Reply:
    """Answer a read_page extraction: sentences of the page sharing words with the goal."""
    if is_constraints(request):
        return text_reply('{"constraints": []}')  # scripted requests state none
    if is_claim_check(request):
        return claim_verdicts(request)
    prompt = _text(request["messages"][-1])
    goal = re.search(r"<goal>(.*?)</goal>", prompt, re.S)
    page = re.search(r"<page[^>]*>\n(.*)\n</page>", prompt, re.S)
    words = {w for w in re.findall(r"\w{4,}", (goal.group(1) if goal else "").lower())}
    sentences = [s.strip() for s in SENTENCE_END.split(page.group(1) if page else "") if s.strip()]
    picked = [s for s in sentences if words & set(re.findall(r"\w{4,}", s.lower()))][:3]
    if fabricate:
        picked.append("This sentence appears nowhere on the page and must be dropped.")
    text = page.group(1) if page else ""
    links = [int(i) for i, anchor in re.findall(r"【(\d+)†([^†】]*)", text)
             if words & set(re.findall(r"\w{4,}", anchor.lower()))]
    # Excerpts are quoted the way a model would: link markers reduced to their anchor text.
    picked = [re.sub(r"【\d+†([^†】]*)(?:†[^】]*)?】", r"\1", p) for p in picked]
    answer = {"relevance": "high" if picked else "none", "judgement": "Scripted reading.", "excerpts": picked,
              "links": links[:5]}
    return text_reply(json.dumps(answer))


class ResearchPolicy:
    """search → read the top pages in parallel → write a section → answer with citations."""

    def __init__(self, pages_per_search: int = 2) -> None:
        self.pages_per_search = pages_per_search

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        messages = request["messages"]
        last = messages[-1]
        previous_calls = [b["name"] for b in _blocks(messages[-2]) if b["type"] == "tool_use"] if len(messages) > 1 else []
        results = _text(last)
        forced = (request.get("tool_choice") or {}).get("type") == "none" or "FINAL TURN" in results
        question = question_of(request)
        if forced:
            return self.final(messages)
        if not previous_calls or previous_calls == ["earlier_research"]:  # the run's own opening search
            return tool_reply(("web_search", {"query": " ".join(question.split()[:5])}))
        if previous_calls[0] == "web_search":
            urls = URL.findall(results)[: self.pages_per_search]
            if not urls:
                return self.final(messages)
            return tool_reply(*[("read_page", {"url": u, "goal": question}) for u in urls])
        if previous_calls[0] == "read_page":
            excerpts = re.findall(r'(\[s\d+\]) "([^"]+)"', results)
            if not excerpts:
                return self.final(messages)
            body = "\n".join(f"- {text} {marker}" for marker, text in excerpts[:4])
            return tool_reply(("write_section", {"title": "Findings", "body": body}))
        return self.final(messages)

    def final(self, messages: list[dict[str, Any]]) -> Reply:
        seen = []
        for message in messages:
            if message["role"] == "user":
                seen += [m for m in MARKER.findall(_text(message)) if m not in seen]
        cited = " ".join(seen[-2:]) if seen else ""
        # Shaped as the prompt asks: working notes first (never published), the answer in tags.
        return text_reply(f"Found: {len(seen)} passages. Missing: nothing the question needs.\n"
                          f"<summary>{f'In short: the sources agree on the figures above. {cited}'.strip()}</summary>")


def is_summary_request(request: dict[str, Any]) -> bool:
    last = request["messages"][-1]
    return any(b.get("type") == "text" and b["text"].startswith("Pause the research")
               for b in _blocks(last))


def summary_reply(request: dict[str, Any]) -> Reply:
    markers = MARKER.findall(_text(request["messages"][-1]))[-3:]
    summary = {
        "established_facts": [{"claim": f"Figure established in scripted step ({m})", "handle": m} for m in markers],
        "exact_identifiers": ["0.03%", "2024-06-30", "VTI"],
        "dead_ends": [{"approach": "searching forums", "why_failed": "no primary sources"}],
        "open_questions": ["ITOT tracking difference for 2025"],
        "current_state": "Sections drafted on fees; tracking data being verified.",
        "next_action": "Read the next fact sheet.",
    }
    return text_reply(json.dumps(summary))


def side_reply(request: dict[str, Any]) -> Reply | None:
    """The answer to a request that is not a turn of the research loop (a page read, a compaction
    summary, the constraints pass), or None for a turn: the preamble every scripted policy shares."""
    if is_extraction(request):
        return extract(request)
    if is_summary_request(request):
        return summary_reply(request)
    if not request.get("tools"):
        return text_reply('{"constraints": []}')
    return None


def turn_of(request: dict[str, Any]) -> int:
    """Which turn of its run a request is, from its own history (so a resumed run counts on)."""
    return 1 + sum(1 for m in request["messages"] if m["role"] == "assistant")


class LongRunPolicy:
    """A long research session: searches, parallel page reads, a section every few turns,
    a fetch_result of an elided result now and then, then an answer after `turns` turns."""

    def __init__(self, turns: int, summary: Any = summary_reply) -> None:
        self.turns = turns
        self.turn = 0
        self.summary = summary
        self.fetched: list[str] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_summary_request(request):
            return self.summary(request)
        if is_claim_check(request):
            return claim_verdicts(request)
        forced = (request.get("tool_choice") or {}).get("type") == "none"
        self.turn += 1
        k = self.turn
        if forced or k >= self.turns:
            return ResearchPolicy().final(request["messages"])
        last = _text(request["messages"][-1])
        recent = MARKER.findall(last)
        if k % 10 == 0 and recent:
            # No figures of its own: the figure check would (rightly) refuse figures no passage states.
            body = " ".join(f"Claim {'abcd'[i]} of this finding {m}." for i, m in enumerate(recent[:4]))
            return tool_reply(("write_section", {"title": f"Finding {k}", "body": body}))
        if k % 17 == 0:
            stub = re.search(r"\[(r_[0-9a-f]+) \| [^\n]*?fetch_result", json.dumps(request["messages"]))
            if stub:
                self.fetched.append(stub.group(1))
                return tool_reply(("fetch_result", {"id": stub.group(1), "length": 2000}))
        if k % 3 == 1:
            return tool_reply(("web_search", {"query": f"topic {k} fees"}))
        return tool_reply(("read_page", {"url": f"https://vanguard.com/doc/{k}", "goal": f"figure {k}"}),
                          ("read_page", {"url": f"https://schwab.com/doc/{k}", "goal": f"figure {k}"}))


def slow_page(fake_web: Any) -> str:
    """The fake web's slow page, listed in every search so a run may read it (read_page opens only
    URLs the run has seen): a run that reads it waits there as long as `fake_web.slow_seconds`."""
    fake_web.add_result("/slow", "VTI fund details", "expense ratio VTI fund details, in full")
    return f"{fake_web.url}/slow"


class SteadyPolicy:
    """A run that keeps working for `turns` turns with quick searches, writes a section early,
    and answers at the end: long enough to be steered, stopped or killed mid-way (with `slow_url`,
    from slow_page(), it waits on that page at turn 3)."""

    def __init__(self, turns: int, slow_url: str | None = None) -> None:
        self.turns = turns
        self.turn = 0
        self.slow_url = slow_url  # when set, turn 3 reads this (slow) page

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        if is_summary_request(request):
            return summary_reply(request)
        if (request.get("tool_choice") or {}).get("type") == "none" or self.turn >= self.turns:
            return ResearchPolicy().final(request["messages"])
        self.turn += 1
        seen = MARKER.findall(json.dumps(request["messages"]))
        if self.turn == 2 and seen:
            return tool_reply(("write_section", {"title": "Fees", "body": f"VTI charges the lowest fee {seen[0]}."}))
        if self.turn == 3 and self.slow_url:
            return tool_reply(("read_page", {"url": self.slow_url, "goal": "anything more"}))
        return tool_reply(("web_search", {"query": f"expense ratio VTI angle {self.turn}"}))


class SteadyRunsPolicy:
    """SteadyPolicy for many runs at once: each request is answered from its own history (how many
    turns its run has taken), never from a counter, so runs on several workers, resumed ones
    included, each take `turns` turns: quick searches, a section at turn 2, an answer at the end."""

    def __init__(self, turns: int) -> None:
        self.turns = turns

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        if is_summary_request(request):
            return summary_reply(request)
        if not request.get("tools"):  # the constraints pass: not a turn
            return text_reply('{"constraints": []}')
        messages = request["messages"]
        turn = 1 + sum(1 for m in messages if m["role"] == "assistant")
        if (request.get("tool_choice") or {}).get("type") == "none" or turn >= self.turns:
            return ResearchPolicy().final(messages)
        seen = MARKER.findall(json.dumps(messages))
        if turn == 2 and seen:
            return tool_reply(("write_section", {"title": "Fees", "body": f"VTI charges the lowest fee {seen[0]}."}))
        return tool_reply(("web_search", {"query": f"expense ratio VTI angle {turn}"}))


# --- task agents (spawn_tasks) -----------------------------------------------------------

EXCERPT = re.compile(r'(\[s\d+\]) "([^"]+)"')


def is_task_agent(request: dict[str, Any]) -> bool:
    """Task agents have a system prompt of their own."""
    return _system_text(request).startswith("You are a task agent")


def objective_of(request: dict[str, Any]) -> str:
    match = re.search(r"^Objective: (.*)$", _text(request["messages"][0]), re.M)
    return match.group(1) if match else ""


def brief_for(objective: str, others: list[str], call_budget: int) -> dict[str, Any]:
    return {
        "objective": objective,
        "output": "the figures asked for, each with its [sN] marker",
        "background": "Scripted lead: nothing established yet.",
        "key_questions": [f"What are the facts about {objective}?"],
        "boundaries": "Do not cover: " + ("; ".join(o for o in others if o != objective) or "anything else"),
        "sources": "issuer fact sheets",
        "call_budget": call_budget,
    }


class TaskAgentsPolicy:
    """Plays the lead and its task agents, told apart by their system prompts.

    The lead hands `objectives` to task agents in one spawn_tasks call, writes one section per
    task that came back with markers (citing them), then answers. Each task agent searches
    `searches` times, reads the first page of its last search, and returns findings citing what
    it read. A task whose objective contains "fail" gets an API error once it has searched.
    Every request is noted in `seen` as (who, monotonic time): who is "lead" or the objective.
    """

    def __init__(self, objectives: list[str], *, searches: int = 1, call_budget: int = 6) -> None:
        self.objectives = objectives
        self.searches = searches
        self.call_budget = call_budget
        self.seen: list[tuple[str, float]] = []
        self._lock = threading.Lock()  # the fake serves requests from its own thread

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        if is_summary_request(request):
            return summary_reply(request)
        who = objective_of(request) if is_task_agent(request) else "lead"
        with self._lock:
            self.seen.append((who, time.monotonic()))
        return self.lead(request) if who == "lead" else self.task_agent(request, who)

    def requests_of(self, who: str) -> list[float]:
        with self._lock:
            return [t for w, t in self.seen if w == who]

    @staticmethod
    def _forced(request: dict[str, Any]) -> bool:
        return (request.get("tool_choice") or {}).get("type") == "none" or "FINAL TURN" in _text(request["messages"][-1])

    def lead(self, request: dict[str, Any]) -> Reply:
        messages = request["messages"]
        if self._forced(request):
            return ResearchPolicy().final(messages)
        previous = [b["name"] for b in _blocks(messages[-2]) if b["type"] == "tool_use"] if len(messages) > 1 else []
        if not previous:
            briefs = [brief_for(o, self.objectives, self.call_budget) for o in self.objectives]
            return tool_reply(("spawn_tasks", {"tasks": briefs}))
        if previous == ["spawn_tasks"]:
            calls = []
            for section in re.split(r"^## ", _text(messages[-1]), flags=re.M)[1:]:
                head = re.match(r"Task (\d+) — (.*?) · ", section)
                markers = list(dict.fromkeys(MARKER.findall(section)))[:3]
                if head and markers:
                    body = " ".join(f"Finding {i} of task {head.group(1)} {m}." for i, m in enumerate(markers, 1))
                    calls.append(("write_section", {"title": f"Task {head.group(1)}: {head.group(2)}", "body": body}))
            if calls:
                return tool_reply(*calls)
        return ResearchPolicy().final(messages)

    def task_agent(self, request: dict[str, Any], objective: str) -> Reply:
        messages = request["messages"]
        steps = (len(messages) - 1) // 2  # the opening, then (assistant, user) per step
        if "fail" in objective.lower() and steps >= 1:
            raise FakeAPIError(500, "scripted failure for this task")
        if self._forced(request) or steps > self.searches:
            return self.findings(objective, messages)
        if steps < self.searches:
            query = " ".join(objective.lower().split()[:4])
            return tool_reply(("web_search", {"query": f"{query} {steps + 1}"}))
        urls = URL.findall(_text(messages[-1]))
        if not urls:
            return self.findings(objective, messages)
        return tool_reply(("read_page", {"url": urls[0], "goal": objective}))

    @staticmethod
    def findings(objective: str, messages: list[dict[str, Any]]) -> Reply:
        results = "\n".join(_text(m) for m in messages[1:] if m["role"] == "user")
        excerpts = EXCERPT.findall(results)[:3]
        if excerpts:
            facts = "; ".join(f"{text[:70]} {marker}" for marker, text in excerpts)
        else:
            facts = " ".join(list(dict.fromkeys(MARKER.findall(results)))[:3]) or "nothing found"
        return text_reply(f"Findings on {objective}: {facts}. Weak evidence: none flagged.")


# --- a thread of runs (tests/test_thread_chain.py) ---------------------------------------

RUN_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
RUNS_BEFORE = re.compile(r'<thread runs_before="(\d+)"')


def run_number(request: dict[str, Any]) -> int:
    """Which run of its thread a request belongs to, read from its opening (1 = no <thread>)."""
    found = RUNS_BEFORE.search(_text(request["messages"][0]))
    return int(found.group(1)) + 1 if found else 1


class ThreadPolicy:
    """A research thread, one run after another, decided from each request alone.

    The constraints pass finds `constraint` in the request that states it (and nothing in
    others). Run 1 searches, writes sec1 citing the first passage and answers with `fact`
    (number words, never digits: the figure check would rightly refuse figures no passage
    states). Every continuation revises sec1 once, citing the marker the opening's outline
    shows, then answers with one cited sentence of its own; the last run (`last_run`) instead
    repeats the run-1 fact as it finds it in its opening, so its answer cites it only if the
    thread's memory kept it.
    """

    def __init__(self, constraint: str, fact: str, last_run: int) -> None:
        self.constraint = constraint
        self.fact = fact
        self.last_run = last_run

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_constraints(request):
            stated = self.constraint.lower() in _text(request["messages"][-1]).lower()
            found = [{"kind": "dates", "text": self.constraint}] if stated else []
            return text_reply(json.dumps({"constraints": found}))
        if is_extraction(request):
            return extract(request)
        if is_summary_request(request):
            return summary_reply(request)
        messages = request["messages"]
        calls = [b for m in messages if m["role"] == "assistant" for b in _blocks(m) if b["type"] == "tool_use"]
        done = [c["name"] for c in calls]
        forced = (request.get("tool_choice") or {}).get("type") == "none"
        run = run_number(request)
        if run == 1:
            return self._first_run(messages, calls, done, forced)
        opening = _text(messages[0])
        outline = re.search(r'^- sec1 "[^"]*".*?(\[s\d+\])', opening, re.MULTILINE)
        marker = outline.group(1) if outline else ""
        word = RUN_WORDS[run] if run < len(RUN_WORDS) else str(run)
        fact_line = next((line for line in opening.splitlines()
                          if line.startswith("- ") and self.fact in line and MARKER.search(line)), "")
        fact_marker = MARKER.search(fact_line).group(0)[1:-1] if fact_line else ""
        if not forced and run == self.last_run and fact_marker and "open_source" not in done:
            # The last run names the source run 1 read (from the opening's index) and opens it.
            return tool_reply(("open_source", {"marker": fact_marker}))
        if not forced and "revise_section" not in done and marker:
            body = f"VTI charges the lowest fee, as run {word} confirmed {marker}."
            return tool_reply(("revise_section", {"section_id": "sec1", "body": body,
                                                  "reason": f"follow-up {word} rechecked the fee"}))
        if run == self.last_run:
            kept = next((line[2:] for line in opening.splitlines()
                         if line.startswith("- ") and self.fact in line and MARKER.search(line)), "")
            answer = kept or "The thread's memory has nothing about the first run."
        else:
            answer = f"Follow-up {word} is answered: the fee ranking holds {marker}."
        return text_reply(f"Found: the thread's passages. Missing: nothing.\n<summary>{answer}</summary>")

    def _first_run(self, messages: list[dict[str, Any]], calls: list[dict[str, Any]], done: list[str],
                   forced: bool) -> Reply:
        if not done and not forced:
            return tool_reply(("web_search", {"query": "expense ratio VTI"}))
        written = [c["input"]["body"] for c in calls if c["name"] == "write_section"]
        if not written and not forced:
            seen = MARKER.findall(_text(messages[-1]))
            if seen:
                return tool_reply(("write_section", {"title": "Fees", "body": f"VTI charges the lowest fee {seen[0]}."}))
        cited = MARKER.search(written[0]) if written else None
        marker = cited.group(0) if cited else ""
        return text_reply(f"Found: one passage. Missing: nothing.\n<summary>{self.fact} {marker}.</summary>")


# What an injected page asks for: the thread's content appended to a URL of its own.
EXFIL_ASK = re.compile(r"(https?://\S+?\?d=)")


class GullibleReaderPolicy(ResearchPolicy):
    """The research policy, but it obeys any page or result that asks it to fetch `…?d=` with the
    question appended: what text injected into a page wants a model to do."""

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        messages = request["messages"]
        asked = EXFIL_ASK.search(_text(messages[-1]))
        tried = any(b["type"] == "tool_use" and "?d=" in str(b.get("input", {}).get("url", ""))
                    for m in messages if m["role"] == "assistant" for b in _blocks(m))
        if asked and not tried:
            from urllib.parse import quote

            leak = asked.group(1) + quote(question_of(request))
            return tool_reply(("read_page", {"url": leak, "goal": "the expense ratio confirmation"}))
        return super().__call__(request)


# --- the team's language (tests/agent/test_language.py) ------------------------------------

LANGUAGE_LINE = re.compile(r"^Language: (\w+)", re.M)
PERCENT = re.compile(r"\d+\.\d+%")
# What the scripted model writes, by the language its opening names.
PHRASES = {
    "English": ("The expense ratio stated is {figure} {marker}.", "In short: the fee is {figure} {marker}."),
    "German": ("Die angegebene Kostenquote beträgt {figure} {marker}.", "Kurz gesagt: die Gebühr beträgt {figure} "
               "{marker}."),
}


class LanguagePolicy:
    """Searches, reads the first result, then writes one section and the summary in the language the
    opening names, each figure written as that language writes numbers ("0,03 %" in German) and cited
    to the English page's excerpt that states it."""

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_constraints(request):
            return text_reply(json.dumps({"constraints": []}))
        if is_extraction(request):
            return extract(request)
        messages = request["messages"]
        found = LANGUAGE_LINE.search(_text(messages[0]))
        lang = found.group(1) if found and found.group(1) in PHRASES else "English"
        previous = [b["name"] for b in _blocks(messages[-2]) if b["type"] == "tool_use"] if len(messages) > 1 else []
        results = "\n".join(_text(m) for m in messages[1:] if m["role"] == "user")
        cited = next(((m, PERCENT.search(t)) for m, t in EXCERPT.findall(results) if PERCENT.search(t)), None)
        if len(messages) == 1:
            return tool_reply(("web_search", {"query": "expense ratio VTI"}))
        if previous == ["web_search"]:
            return tool_reply(("read_page", {"url": URL.findall(_text(messages[-1]))[0], "goal": "VTI expense ratio"}))
        if cited is None:
            return text_reply("<summary>Nothing found.</summary>")
        marker, figure = cited[0], cited[1].group(0)
        if lang == "German":
            figure = figure.replace(".", ",").replace("%", " %")
        section, summary = PHRASES[lang]
        if previous == ["read_page"]:
            return tool_reply(("write_section", {"title": "Fees" if lang == "English" else "Gebühren",
                                                 "body": section.format(figure=figure, marker=marker)}))
        return text_reply(f"<summary>{summary.format(figure=figure, marker=marker)}</summary>")


# --- the team's own Slack and MCP servers (tests/e2e/test_workspace_search.py, test_mcp.py) ----------


def calls_made(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in request["messages"] if m["role"] == "assistant" for b in _blocks(m) if b["type"] == "tool_use"]


class CiteWhatOneToolFindsPolicy:
    """Calls one tool (`tool`, `arguments`), writes a section citing every marker its result gave,
    then answers citing them all: whatever the tool found, the model tries to cite. `before`, when
    set, runs just before the call is made (a test stops a server there)."""

    def __init__(self, tool: str, arguments: dict[str, Any], *, before: Any = None) -> None:
        self.tool = tool
        self.arguments = arguments
        self.before = before

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        done = [c["name"] for c in calls_made(request)]
        forced = (request.get("tool_choice") or {}).get("type") == "none"
        found = list(dict.fromkeys(MARKER.findall(_text(request["messages"][-1])))) if done else []
        if not forced and self.tool not in done:
            if self.before is not None:
                self.before()
            return tool_reply((self.tool, dict(self.arguments)))
        if not forced and "write_section" not in done and found:
            body = " ".join(f"The team's source says so {m}." for m in found)
            return tool_reply(("write_section", {"title": "What the team has", "body": body}))
        cited = " ".join(dict.fromkeys(m for m in MARKER.findall(json.dumps(request["messages"]))))
        return text_reply(f"Found: what the tool gave. Missing: nothing.\n<summary>The team's sources: {cited}.</summary>")


# --- plan first (tests/e2e/test_plan_first.py) ----------------------------------------------------


def is_planning(request: dict[str, Any]) -> bool:
    return "You draft a research plan" in _system_text(request)


class PlanFirstPolicy(ResearchPolicy):
    """Drafts a plan when asked for one (its key questions grow with each requested change), and
    researches as ResearchPolicy once the research runs."""

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_planning(request):
            body = _text(request["messages"][-1])
            changes = re.findall(r"^- (.+)$", body.split("<requested_changes>")[1], re.M) if "<requested_changes>" in body else []
            plan = {"key_questions": ["What does each fund charge?", *[f"And: {c}" for c in changes]],
                    "outline": ["Expense ratios", "Verdict"], "expected_requests": 12, "expected_minutes": 8}
            return text_reply(json.dumps(plan))
        return super().__call__(request)


# Where write_section answers with its id (the fault policies revise what they wrote).
SECTION_ID = re.compile(r"section_id: (\w+)")


class FaultAtTurnThree:
    """search → write a section → [the fault, as turn 3 is answered] → search → revise the section
    → write a second one → answer. `at_turn_3` (the fault: a Redis restart, a failover) is called
    before turn 3's answer, with the worker about to write the events of that turn."""

    def __init__(self, at_turn_3: Callable[[], None]) -> None:
        self.at_turn_3 = at_turn_3
        self.turn = 0

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        if is_summary_request(request):
            return summary_reply(request)
        if not request.get("tools"):  # a small-model call (e.g. reading constraints): not a turn
            return text_reply('{"constraints": []}')
        if (request.get("tool_choice") or {}).get("type") == "none":
            return ResearchPolicy().final(request["messages"])
        self.turn += 1
        history = json.dumps(request["messages"])
        seen = list(dict.fromkeys(MARKER.findall(history)))
        if self.turn == 1:
            return tool_reply(("web_search", {"query": "expense ratio VTI"}))
        if self.turn == 2:
            return tool_reply(("write_section", {"title": "Fees", "body": f"VTI charges the lowest fee {seen[0]}."}))
        if self.turn == 3:
            self.at_turn_3()
            return tool_reply(("web_search", {"query": "tracking error VTI ITOT SCHB"}))
        if self.turn == 4:
            section = SECTION_ID.search(history)
            assert section, "write_section answered with its section id"
            return tool_reply(("revise_section", {"section_id": section.group(1), "reason": "a newer fact sheet",
                                                  "body": f"VTI charges the lowest fee {seen[0]} {seen[-1]}."}))
        if self.turn == 5:
            return tool_reply(("write_section", {"title": "Tracking", "body": f"Tracking differs by fund {seen[-1]}."}))
        return ResearchPolicy().final(request["messages"])


# --- a URL the model composed, echoed by the bot (tests/e2e/test_crafted_url.py) --------------------


def results_of(request: dict[str, Any], name: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(call input, its tool_result block) for every `name` call the request's history answers."""
    calls = {b["id"]: b["input"] for b in calls_made(request) if b["name"] == name and "id" in b}
    return [(calls[b["tool_use_id"]], b) for m in request["messages"] if m["role"] == "user"
            for b in _blocks(m) if b["type"] == "tool_result" and b.get("tool_use_id") in calls]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    return content if isinstance(content, str) else " ".join(c.get("text", "") for c in content)


class CraftedUrlPolicy:
    """Run 1: web_search with `crafted` (a URL of the model's own) as the query, so the progress
    message shows "Now: Searching: <crafted>"; once `echoed()` says the thread shows it (and the
    adapter's thread cache has expired), read_thread; then read_page on `crafted` and on
    `person_url` (a link a person wrote in the thread). If read_thread came back without the echo
    (the progress moved on first), the search and the read are tried again, up to `attempts`.
    A continuation reads both URLs again at once. Each run answers citing what it read."""

    THREAD_CACHE_SECONDS = 5.5  # bot/slack/workspace.py's THREAD_CACHE_SECONDS, and a little

    def __init__(self, crafted: str, person_url: str, echoed: Callable[[], bool], *, attempts: int = 3,
                 wait_seconds: float = 30.0) -> None:
        self.crafted = crafted
        self.person_url = person_url
        self.echoed = echoed
        self.attempts = attempts
        self.wait_seconds = wait_seconds
        self._thread_read_at = 0.0

    def _reads(self) -> Reply:
        goal = "what the notes say about the lowest fee of the three funds"
        return tool_reply(("read_page", {"url": self.crafted, "goal": goal}),
                          ("read_page", {"url": self.person_url, "goal": goal}))

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        if is_summary_request(request):
            return summary_reply(request)
        forced = (request.get("tool_choice") or {}).get("type") == "none"
        done = [c["name"] for c in calls_made(request)]
        if forced or "read_page" in done:
            return ResearchPolicy().final(request["messages"])
        if run_number(request) > 1:
            return self._reads()
        if not done:
            self._thread_read_at = time.monotonic()  # the opening has just read the thread
        if done[-1:] == ["read_thread"]:
            echoes = [self.crafted in result_text(r) for _, r in results_of(request, "read_thread")]
            if echoes[-1] or done.count("read_thread") >= self.attempts:
                return self._reads()
        if done[-1:] != ["web_search"]:
            return tool_reply(("web_search", {"query": self.crafted}))
        deadline = time.monotonic() + self.wait_seconds
        while not (self.echoed() and time.monotonic() - self._thread_read_at >= self.THREAD_CACHE_SECONDS):
            if time.monotonic() > deadline:
                break  # the test's assertions say what never showed
            time.sleep(0.1)
        self._thread_read_at = time.monotonic()
        return tool_reply(("read_thread", {"range": "all"}))
