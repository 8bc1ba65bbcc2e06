"""A URL the model composed never becomes fetchable by being shown (issue 35, item 1): every place
the bot echoes model-chosen text (the progress line, a disagreement, a section, a constraint, the
status, the final summary; rendered by the real renderers) is posted back into the thread as the
bot's own message, and reading the thread seeds none of its URLs, while a link a person wrote
there is still seen."""
from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import AgentConfig, Finished, Progress, SectionWritten
from agent.citations import SourceRegistry
from agent.events import Disagreement
from agent.tools.base import ToolContext
from agent.tools.read_thread import ReadThread, ReadThreadInput
from agent.workspace import MemoryWorkspace
from bot.publishing import progress_render, report_render, stream_render
from jobs import Run, RunState
from jobs.records.state import apply_event

PERSON_URL = "https://people.example/fund-facts"


def _state(crafted: str) -> RunState:
    """A run whose model-chosen text carries `crafted` in each field the bot shows."""
    state = RunState(run=Run(channel="C1", thread_ts="1.1", requester="UANA", question="fees of VTI", team="T1",
                             constraints=[f"only {crafted}"]))
    for event in (Progress(phase="researching", activity=f"Searching: {crafted}"),
                  Disagreement(text=f"is it {crafted}?"),
                  SectionWritten(section_id="a", title=f"On {crafted}", body=f"See {crafted}.")):
        state = apply_event(state, event)  # type: ignore[arg-type]
    return state


def _strings(node: object) -> list[str]:
    """The texts of a message's blocks, as a reader of the thread gets them back."""
    if isinstance(node, list):
        return [text for item in node for text in _strings(item)]
    if isinstance(node, dict):
        return [text for key, value in node.items()
                for text in ([value] if key == "text" and isinstance(value, str) else _strings(value))]
    return []


def _texts(message: report_render.SlackMessage) -> list[str]:
    return [message.text, *_strings(message.blocks)]


# Every surface where the bot shows model-chosen text, with the text it would post.
ECHOES: dict[str, Callable[[RunState], list[str]]] = {
    "progress": lambda s: _texts(progress_render.render_progress(s)),
    "report": lambda s: _texts(report_render.render_report(s)),
    "status": lambda s: [progress_render.render_status(s)],  # the run's phase and counts: shows no URL today
    "stream": lambda s: list(stream_render.render_view(s).texts.values()),
    "final report": lambda s: _texts(report_render.render_report(
        apply_event(s, Finished(status="completed", summary=f"Done: {s.run.constraints[0]}")))),  # type: ignore[arg-type]
}

hosts = st.from_regex(r"[a-z]{3,10}\.(com|io|example)", fullmatch=True)
paths = st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True)


@pytest.mark.parametrize("surface", sorted(ECHOES))
@settings(max_examples=15, deadline=None)
@given(host=hosts, path=paths, figure=st.integers(0, 10**9))
async def test_a_url_the_bot_echoed_is_not_seen_when_the_thread_is_read_back(
        surface: str, host: str, path: str, figure: int) -> None:
    crafted = f"https://{host}/{path}?d={figure}"
    workspace = MemoryWorkspace()
    workspace.post("UANA", f"fees of VTI, see {PERSON_URL}", "1.1")
    for n, text in enumerate(ECHOES[surface](_state(crafted)), start=2):
        workspace.post("deepthread", text, f"{n}.1").is_bot = True
    # The surfaces now show a URL the model wrote as its domain only (issue 45, item 5a:
    # tests/bot/publishing/test_foreign_links.py); an app's message that does show one (another app's,
    # or one posted before) must seed nothing either.
    workspace.post("deepthread", f"Now: Searching: {crafted}", "99.1").is_bot = True

    async def emit(_: object) -> None:
        return None

    async with httpx.AsyncClient() as http:
        ctx = ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=http, model=None, emit=emit,
                          goal_question="q", workspace=workspace)  # type: ignore[arg-type]
        result = await ReadThread().run(ReadThreadInput(range="all"), ctx)
    assert not result.is_error
    if surface != "status":
        assert any(crafted in m.text for m in await workspace.messages(1, 50)), "the surface shows the URL"
    assert not ctx.seen.allows(crafted, ctx), f"{surface}: a URL the model composed became fetchable"
    assert ctx.seen.allows(PERSON_URL, ctx), "a link a person wrote in the thread is still seen"
