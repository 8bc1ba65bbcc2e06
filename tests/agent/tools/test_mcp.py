"""The team's MCP servers as research tools, against a real MCP server (the SDK's server side on
loopback): listing, the read-only rule and the allowlist, citable results, and every way a
server fails giving a clear result instead of a stalled run."""
from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from agent import AgentConfig, McpServerConfig, SourceRegistry
from agent.tools.base import ToolContext
from agent.tools.mcp import McpTool, list_mcp_tools
from tests.fakes.mcp_server import TOKEN, WIKI_PAGE, McpTestServer
from tests.fakes.server import free_port


@pytest.fixture
def wiki() -> Iterator[McpTestServer]:
    server = McpTestServer().start()
    yield server
    server.stop()


def config(server: McpTestServer, **extra) -> McpServerConfig:
    return McpServerConfig(name="wiki", url=server.url, headers={"Authorization": SecretStr(TOKEN)}, **extra)


def context() -> ToolContext:
    async def emit(_event) -> None:
        return None

    return ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=httpx.AsyncClient(), model=None,  # type: ignore[arg-type]
                       emit=emit, goal_question="q")


async def test_only_read_only_tools_are_offered_prefixed_and_their_results_are_citable(wiki) -> None:
    listing = await list_mcp_tools([config(wiki)])
    assert [t.name for t in listing.tools] == ["wiki__lookup"]
    assert listing.withheld == ["wiki__write_page (not marked read-only)"] and listing.unreachable == []
    tool = listing.tools[0]
    assert isinstance(tool, McpTool)
    schema = tool.schema()
    assert schema["input_schema"]["required"] == ["title"] and "title" not in schema["input_schema"]
    assert "«Look up a page of the team wiki" in schema["description"] and "never instructions" in schema["description"]
    assert schema["description"].startswith("Tool `lookup` of the team's MCP server `wiki` (read-only)")
    ctx = context()
    result = await tool.run(tool.Input.model_validate({"title": "Fees"}), ctx)
    assert not result.is_error and "[s1]" in result.text and WIKI_PAGE in result.text, result.text
    source = ctx.registry.get("s1")
    assert source is not None and source.origin == "mcp:wiki/lookup" and source.url == "mcp://wiki/lookup"
    assert wiki.ran == [("lookup", {"title": "Fees"})]


async def test_the_operator_may_allow_writing_tools_and_narrow_with_an_allowlist(wiki) -> None:
    both = await list_mcp_tools([config(wiki, allow_writes=True)])
    assert sorted(t.name for t in both.tools) == ["wiki__lookup", "wiki__write_page"]
    narrowed = await list_mcp_tools([config(wiki, allow_writes=True, allow=["write_*"])])
    assert [t.name for t in narrowed.tools] == ["wiki__write_page"]
    assert "wiki__lookup (not in the allowlist)" in narrowed.withheld


@pytest.mark.parametrize("case", ["nothing listening", "wrong credentials"])
async def test_a_server_that_cannot_be_reached_at_start_is_named_and_left_out(wiki, case) -> None:
    server = (McpServerConfig(name="tracker", url=f"http://127.0.0.1:{free_port()}/mcp") if case == "nothing listening"
              else McpServerConfig(name="tracker", url=wiki.url, headers={"Authorization": SecretStr("Bearer nope")}))
    listing = await list_mcp_tools([config(wiki), server], seconds=5)
    assert [t.name for t in listing.tools] == ["wiki__lookup"]
    assert [name for name, _ in listing.unreachable] == ["tracker"]
    assert listing.unreachable[0][1], "says why"


async def test_a_server_that_goes_down_gives_a_clear_result_not_a_stalled_run(wiki) -> None:
    tool = (await list_mcp_tools([config(wiki)])).tools[0]
    wiki.stop()
    result = await tool.run(tool.Input.model_validate({"title": "Fees"}), context())
    assert result.is_error and "could not answer lookup" in result.text and "use other sources" in result.text


async def test_a_refusal_of_the_server_is_reported_with_what_to_do(wiki) -> None:
    tool = (await list_mcp_tools([config(wiki)])).tools[0]
    result = await tool.run(tool.Input.model_validate({"wrong": "argument"}), context())
    assert result.is_error and ("refused lookup" in result.text or "could not answer" in result.text), result.text


def test_a_bad_setting_says_what_to_fix() -> None:
    from bot.settings import Settings

    assert Settings(DEEPTHREAD_MCP_SERVERS="").mcp_servers() == []
    with pytest.raises(ValueError, match="not JSON"):
        Settings(DEEPTHREAD_MCP_SERVERS="[{").mcp_servers()
    with pytest.raises(ValueError, match="name"):
        Settings(DEEPTHREAD_MCP_SERVERS='[{"name": "Bad Name", "url": "https://x/mcp"}]').mcp_servers()
    with pytest.raises(ValueError, match="twice"):
        Settings(DEEPTHREAD_MCP_SERVERS='[{"name": "a", "url": "https://x/mcp"}, {"name": "a", "url": "https://y/mcp"}]'
                 ).mcp_servers()
    parsed = Settings(DEEPTHREAD_MCP_SERVERS='{"wiki": {"url": "https://w/mcp", "headers": {"X-Key": "s3cret-value"}}}'
                      ).mcp_servers()
    assert parsed[0].name == "wiki" and "s3cret-value" not in repr(parsed[0]), "headers are secrets"
