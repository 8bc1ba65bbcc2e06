"""search_workspace end to end below the loop: the tool, Slack's Real-time Search through the real
slack_sdk client, and the fake Slack answering as the acting user (scopes, memberships, tokens).

What may be cited where is generated over every case: setting × where the report is × where the
message lives; a private result never becomes a footnote outside the requester's DM."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import httpx
import pytest
from pydantic import SecretStr
from slack_sdk.web.async_client import AsyncWebClient

from agent import AgentConfig, SourceRegistry, assemble
from agent.report import Section
from agent.tools.base import ToolContext
from agent.tools.read_thread import ReadThread, ReadThreadInput
from agent.tools.search_workspace import SearchWorkspace, SearchWorkspaceInput
from agent.visibility import private_sources_allowed
from bot.slack.workspace_search import SlackWorkspaceSearch
from jobs import Run, RunState
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_search import expire_action_tokens, issue_action_token, queries, set_members

PRIVATE_SCOPES = {"search:read.private", "search:read.mpim", "search:read.im"}
WHERE = {"public": "C0TEAM", "private": "G0SECRET", "dm": "D0ANA"}


def seed(slack: FakeSlack) -> dict[str, str]:
    set_members(slack, "G0SECRET", {"U0ANA"})
    set_members(slack, "D0ANA", {"U0ANA"})
    set_members(slack, "G0OTHERS", {"U0BEN"})
    return {
        "public": slack.add_user_message("C0TEAM", "Decision: the Gizmo vendor wins on fees", "U0BEN"),
        "private": slack.add_user_message("G0SECRET", "Gizmo vendor discount is confidential", "U0CAL"),
        "dm": slack.add_user_message("D0ANA", "note to self about the Gizmo vendor", "U0ANA"),
        "others": slack.add_user_message("G0OTHERS", "Gizmo vendor gossip Ana cannot see", "U0BEN"),
    }


class _Model:  # search_workspace calls no model
    pass


async def noop(_event) -> None:
    return None


def context(search: SlackWorkspaceSearch | None, *, private: bool, events: list | None = None) -> ToolContext:
    async def emit(event) -> None:
        (events if events is not None else []).append(event)

    return ToolContext(
        config=AgentConfig(),
        registry=SourceRegistry(),
        http=httpx.AsyncClient(),
        model=_Model(),  # type: ignore[arg-type]
        emit=emit,
        goal_question="q",
        workspace_search=search,
        private_sources=private,
    )


def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test", base_url=f"{slack.url}/api/")


@pytest.mark.parametrize("private", [False, True])
async def test_the_search_finds_what_the_requester_sees_and_only_private_when_allowed(fake_slack, private) -> None:
    fake_slack.scopes |= PRIVATE_SCOPES
    seed(fake_slack)
    token = SecretStr(issue_action_token(fake_slack, "U0ANA"))
    ctx = context(SlackWorkspaceSearch(client(fake_slack), token), private=private)
    result = await SearchWorkspace().run(SearchWorkspaceInput(query="Gizmo vendor"), ctx)
    assert not result.is_error, result.text
    sources = ctx.registry.all()
    channels = {s.url.split("/archives/")[1].split("/")[0] for s in sources}
    assert channels == ({"C0TEAM", "G0SECRET", "D0ANA"} if private else {"C0TEAM"})
    assert "G0OTHERS" not in result.text, "a private channel the requester is not in is never searched"
    assert all(s.origin == "slack" and s.private == (not s.url.split("/archives/")[1].startswith("C")) for s in sources)
    asked = [q["types"] for q in queries(fake_slack)]
    assert asked[0] == ["public_channel"] and (len(asked) == 2) == private, "private kinds only asked when allowed"
    assert (
        "[s1]" in result.text
        and "<@U0BEN>" in result.text
        and "https://deepthread-test.slack.com/archives/" in result.text
    )


async def test_a_found_message_opens_through_read_thread(fake_slack) -> None:
    ts = seed(fake_slack)["public"]
    fake_slack.add_user_message("C0TEAM", "Agreed, and the contract starts in March", "U0CAL", thread_ts=ts)
    ctx = context(
        SlackWorkspaceSearch(client(fake_slack), SecretStr(issue_action_token(fake_slack, "U0ANA"))), private=False
    )
    found = await SearchWorkspace().run(SearchWorkspaceInput(query="Gizmo vendor decision"), ctx)
    permalink = next(line.strip() for line in found.text.splitlines() if "/archives/C0TEAM/" in line)
    opened = await ReadThread().run(ReadThreadInput(message=permalink), ctx)
    assert not opened.is_error and "contract starts in March" in opened.text, opened.text
    refused = await ReadThread().run(
        ReadThreadInput(message="https://deepthread-test.slack.com/archives/G0OTHERS/p1"), ctx
    )
    assert refused.is_error and "not a message search_workspace found" in refused.text


@pytest.mark.parametrize("case", ["no token", "expired token", "no scope"])
async def test_missing_permission_gives_a_clear_result_and_one_notice(fake_slack, case) -> None:
    seed(fake_slack)
    token = None if case == "no token" else SecretStr(issue_action_token(fake_slack, "U0ANA"))
    if case == "expired token":
        expire_action_tokens(fake_slack)
    if case == "no scope":
        fake_slack.scopes -= {"search:read.public", "search:read.files"}
    events: list = []
    tool = SearchWorkspace()
    ctx = context(SlackWorkspaceSearch(client(fake_slack), token), private=False, events=events)
    first = await tool.run(SearchWorkspaceInput(query="Gizmo vendor"), ctx)
    second = await tool.run(SearchWorkspaceInput(query="vendor fees"), ctx)
    expected = {"no token": "no action token", "expired token": "has run out", "no scope": "search:read.public"}[case]
    assert first.is_error and expected in first.text and "Do not retry" in first.text, first.text
    assert second.is_error
    assert len(events) == 1 and expected in events[0].text, "one notice per run and condition"
    assert len(ctx.registry) == 0


async def test_the_tool_is_not_available_without_the_teams_slack() -> None:
    result = await SearchWorkspace().run(SearchWorkspaceInput(query="x y"), context(None, private=False))
    assert result.is_error and "not available" in result.text


SETTINGS = ("public", "dm", "off")
REPORTS = {"a public channel": "C0TEST", "a private channel": "G0TEST", "the requester's DM": "D0ANA"}


@pytest.mark.parametrize(
    ("setting", "report_in", "private_source"), list(itertools.product(SETTINGS, REPORTS, [False, True]))
)
def test_a_private_result_is_a_footnote_only_in_the_requesters_dm(setting, report_in, private_source) -> None:
    """The rule at report assembly, whatever the model cited: generated over every setting and place."""
    channel = REPORTS[report_in]
    run = Run(channel=channel, thread_ts="1.0", question="q", private_sources=private_sources_allowed(setting, channel))
    registry = SourceRegistry()
    source, _ = registry.add(
        "https://x.slack.com/archives/G1/p1", "msg", "a passage", origin="slack", private=private_source
    )
    state = RunState(
        run=run,
        summary="Cited [s1].",
        sections=[Section(section_id="sec1", title="T", body="Body [s1].")],
        sources={s.marker: s for s in registry.all()},
    )
    report = assemble(state.summary, state.sections, state.sources, private_allowed=state.run.cites_private)
    shown = bool(report.footnotes)
    allowed = (not private_source) or (setting == "dm" and channel.startswith("D"))
    assert shown == allowed, (setting, report_in, private_source)
    assert "[s1]" not in report.summary and "[s1]" not in report.sections[0][1], "never a raw marker"


def test_the_action_token_never_reaches_the_stored_record_or_a_repr() -> None:
    run = Run(question="q", action_token=SecretStr("12345.98765.abcd"))
    assert "12345.98765" not in run.model_dump_json() and "12345.98765" not in repr(run)
    assert SimpleNamespace(run=run).run.action_token.get_secret_value() == "12345.98765.abcd"
