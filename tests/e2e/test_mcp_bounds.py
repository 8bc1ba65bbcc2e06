"""A hostile MCP server against the real thing: a 200 MB answer leaves the process calling it (a
subprocess running our MCP client, as a worker does, against the SDK's real server) under its
ordinary peak + 100 MB; a server listing 3,000 tools in a real serve+worker run has only the capped
few offered, and the run says which were left out, in its opening and its progress message."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import defaults
from tests.e2e.stack import CHANNEL, block_text, bot_replies, main_requests, post_event, report_text
from tests.fakes.mcp_server import TOKEN, McpTestServer
from tests.fakes.policies import CiteWhatOneToolFindsPolicy
from tests.fakes.slack import app_mention_event
from tests.processes import deepthread_stack, environment, wait_for

MB = 1024 * 1024

CALLER = textwrap.dedent("""
    import asyncio, json, sys
    import httpx
    from pydantic import SecretStr
    from agent import AgentConfig, McpServerConfig, SourceRegistry
    from agent.tools.base import ToolContext
    from agent.tools.mcp import list_mcp_tools

    def peak() -> int:  # VmHWM: the most this process has ever had resident
        line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
        return int(line.split()[1]) * 1024

    async def emit(_event):
        return None

    async def main() -> None:
        server = McpServerConfig(name="wiki", url=sys.argv[1], headers={"Authorization": SecretStr(sys.argv[2])})
        tools = {t.tool: t for t in (await list_mcp_tools([server])).tools}
        ctx = ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=httpx.AsyncClient(), model=None,
                          emit=emit, goal_question="q")
        ordinary = await tools["lookup"].run(tools["lookup"].Input.model_validate({"title": "Fees"}), ctx)
        before = peak()
        huge = await tools["export"].run(tools["export"].Input.model_validate({}), ctx)
        print(json.dumps({"ordinary": ordinary.text, "huge": huge.text, "huge_error": huge.is_error,
                          "before": before, "after": peak()}))

    asyncio.run(main())
""")


@pytest.fixture
def exporter() -> Iterator[McpTestServer]:
    server = McpTestServer(export_bytes=200 * MB).start()
    yield server
    server.stop()


def test_a_200_mb_answer_leaves_the_caller_under_its_ordinary_peak_plus_100_mb(exporter) -> None:
    done = subprocess.run([sys.executable, "-c", CALLER, exporter.url, TOKEN], capture_output=True, text=True,
                          timeout=120, env=environment())
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert "Fees decision" in seen["ordinary"]
    grew = (seen["after"] - seen["before"]) / MB
    assert grew < 100, f"the peak grew {grew:.0f} MB past an ordinary call's"
    assert seen["huge_error"] and "narrower result" in seen["huge"], seen["huge"]
    assert exporter.export_sent < 200 * MB, "the caller hung up instead of reading it all"


@pytest.fixture
def crowded() -> Iterator[McpTestServer]:
    server = McpTestServer(many_tools=3000).start()
    yield server
    server.stop()


def test_a_3000_tool_server_is_capped_and_the_run_names_what_was_left_out(
        tmp_path: Path, redis_url, fake_slack, fake_model, fake_web, crowded) -> None:
    fake_model.policy = CiteWhatOneToolFindsPolicy("wiki__lookup", {"title": "Fees"})
    servers = json.dumps([{"name": "wiki", "url": crowded.url, "headers": {"Authorization": TOKEN}}])
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_MCP_SERVERS=servers) as stack:
        mention = app_mention_event("What did the team decide about fees?", channel=CHANNEL)
        thread = fake_slack.seed_event(mention)
        assert post_event(stack, mention).status_code == 200
        replies = wait_for(lambda: len(bot_replies(fake_slack, thread)) >= 2 and bot_replies(fake_slack, thread), 15,
                           "run messages")
        wait_for(lambda: "Final" in report_text(fake_slack, replies[1].ts), 60, "the final report")
        progress = block_text(fake_slack.message(CHANNEL, replies[0].ts))
    requests = main_requests(fake_model)
    offered = [t["name"] for t in requests[0].get("tools", []) if t["name"].startswith("wiki__")]
    assert len(offered) == defaults.MCP_TOOLS_PER_SERVER and offered[:2] == ["wiki__lookup", "wiki__tool_0000"]
    opening = requests[0]["messages"][0]["content"][0]["text"]
    left = "MCP server wiki lists more tools than are offered"
    assert left in opening and "wiki__tool_0063" in opening and "2927 more" in opening, opening
    assert left in progress, progress
