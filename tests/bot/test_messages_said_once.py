"""Every way a run's end is shown says each thing once: "Run ended early: the run stopped early" and
"Stopped · Why: stopped by @ana" said the end twice, once in the surface's words (the catalogue's, the
terminal's) and again in the reason the engine wrote.

Generated over the class: every reason the engine and the job layer can end a run with (each
`Outcome(...)` and stop reason in agent/ and jobs/, read from the source, and every description of a
model failure, for each provider and error), in each catalogue's language, through every surface that
frames a reason (the Slack progress message, the stream's last words, the pinned report's status line,
the terminal's last line). A frame's words may not come back in the reason shown with it."""
from __future__ import annotations

import ast
import re
from datetime import UTC, datetime

import anthropic
import httpx2
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import describe_api_error
from agent.silence import ModelSilent
from bot.catalogue import CATALOGUES, said_once
from bot.cli.terminal import end_line
from bot.publishing.progress_render import render_progress
from bot.publishing.report_blocks import _status_plain
from bot.publishing.stream_render import end_text
from jobs import Run, RunState, RunStatus
from jobs.control.hard_stop import forced_reason
from tests.paths import ROOT

# A question in each catalogue's language, so words_for picks that catalogue.
QUESTIONS = {"en": "What are the fees of the three funds?", "de": "Welche Gebühren haben die drei Fonds?"}
# Filled into a reason's placeholders: words no frame uses.
PLACEHOLDER = "<@U0ANA>"
REQUEST = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")


def _template(node: ast.expr) -> str | None:
    """A reason written in the source: a string, or an f-string with its fields filled."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else PLACEHOLDER for part in node.values)
    return None


def source_reasons() -> list[str]:
    """The reasons agent/ and jobs/ end runs with: Outcome(status, summary, REASON), the stop reasons of
    the loop, its guard and the hard stop (Interrupted(...), `reason = ...` beside them)."""
    found = set()
    for package in ("agent", "jobs"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("Outcome", "Interrupted"):
                    args = node.args[2:3] if node.func.id == "Outcome" else node.args[:1]  # type: ignore[attr-defined]
                    found.update(filter(None, map(_template, args)))
                if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "reason" for t in node.targets):
                    template = _template(node.value)
                    if template and template.startswith("stopped"):
                        found.add(template)
    return sorted(found)


def model_reasons() -> list[str]:
    """What a run that lost the model says, for each provider, kind of failure and count of tries."""
    silent = anthropic.APITimeoutError(REQUEST)
    silent.__cause__ = ModelSilent(REQUEST, waited=10, awaited="the first byte")
    stalled = anthropic.APITimeoutError(REQUEST)
    stalled.__cause__ = ModelSilent(REQUEST, waited=30, awaited="the next stream event")
    errors: list[anthropic.APIError] = [silent, stalled, anthropic.APITimeoutError(REQUEST),
                                        anthropic.APIConnectionError(request=REQUEST)]
    for status, kind in ((400, anthropic.BadRequestError), (401, anthropic.AuthenticationError),
                         (403, anthropic.PermissionDeniedError), (404, anthropic.NotFoundError),
                         (429, anthropic.RateLimitError), (500, anthropic.InternalServerError),
                         (529, anthropic.APIStatusError)):
        body = {"type": "error", "error": {"type": "api_error", "message": "prompt is too long"}}
        errors.append(kind("m", response=httpx2.Response(status, request=REQUEST), body=body))
    return [describe_api_error(error, provider, tries) for error in errors
            for provider in ("anthropic", "bedrock", "vertex") for tries in (1, 3)]


REASONS = source_reasons() + model_reasons() + [forced_reason("<@U0ANA>", 20)]
ENDINGS = (RunStatus.failed, RunStatus.stopped)


def _stems(text: str) -> list[str]:
    words = re.findall(r"[a-zäöüß]+", text.lower())
    return [re.sub(r"(ped|ed|ing|s)$", "", word) for word in words if len(word) > 2]


def frames(language: str, status: RunStatus) -> list[str]:
    """The words each surface puts before a reason for this ending."""
    words = CATALOGUES[language]
    slack = words["stopped"] if status == RunStatus.stopped else words["ended_early"]
    report = words["stopped"] if status == RunStatus.stopped else words["incomplete"]
    terminal = "Run stopped" if status == RunStatus.stopped else "Run ended early"
    return [slack, report, "Stopped" if status == RunStatus.stopped else "Ended early", terminal]


def shown(state: RunState) -> list[str]:
    """The reason as each surface shows it: the progress message, the stream's end, the report's status line,
    the terminal's last line."""
    return [render_progress(state).text, end_text(state), _status_plain(state), end_line(state)]


def said_twice(frame: str, text: str) -> list[str]:
    """The frame's words that the text says more than once."""
    counted = _stems(text)
    return [stem for stem in dict.fromkeys(_stems(frame)) if counted.count(stem) > 1]


def test_the_source_gives_the_reasons_a_run_ends_with() -> None:
    """The scan finds what it must (else the test below would pass on nothing)."""
    assert any(r.startswith("stopped by") for r in REASONS) and any("final answer" in r for r in REASONS)
    assert any(r.startswith("the model endpoint https://api.anthropic.com/v1/messages sent nothing") for r in REASONS)
    assert not any("stopped early" in r for r in REASONS), "a reason never restates the ending"


@settings(max_examples=300, deadline=None)
@given(reason=st.sampled_from(REASONS), status=st.sampled_from(ENDINGS), language=st.sampled_from(sorted(QUESTIONS)))
def test_a_runs_end_and_its_reason_are_each_said_once_on_every_surface(reason: str, status: RunStatus,
                                                                       language: str) -> None:
    state = RunState(run=Run(question=QUESTIONS[language]), status=status, reason=reason,
                     finished_at=datetime(2026, 12, 1, 10, 42, tzinfo=UTC))
    for frame, text in zip(frames(language, status), shown(state), strict=True):
        assert not said_twice(frame, text), f"{frame!r} said twice in: {text}"


def test_said_once_folds_a_reason_that_opens_with_the_ending() -> None:
    assert said_once("Stopped", "stopped by <@U0ANA> at 10:42 UTC") == "Stopped by <@U0ANA> at 10:42 UTC"
    assert said_once("Stopped", "the budget ran out") is None
    assert said_once("Angehalten", "stopped by <@U0ANA>") is None, "another language: both are shown"
