"""The team's MCP servers end to end: real serve and worker, a real MCP server (the SDK's server
side) on loopback with a read-only and a writing tool. The run cites the read-only tool's result;
the writing tool is never offered; a server unreachable at the start is named in the opening and
the progress message; a server that goes down mid-run gives a clear tool result and the run ends."""
from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from bot.cli.inspect import inspect
from jobs import RunStore
from tests.e2e.stack import CHANNEL, block_text, bot_replies, main_requests, post_event, report_text
from tests.fakes.mcp_server import TOKEN, WIKI_PAGE, McpTestServer
from tests.fakes.policies import CiteWhatOneToolFindsPolicy
from tests.fakes.server import free_port
from tests.fakes.slack import app_mention_event
from tests.fakes.slack_records import TEAM_ID
from tests.processes import deepthread_stack, wait_for


@pytest.fixture
def wiki() -> Iterator[McpTestServer]:
    server = McpTestServer().start()
    yield server
    server.stop()


def servers(wiki: McpTestServer) -> str:
    return json.dumps([{"name": "wiki", "url": wiki.url, "headers": {"Authorization": TOKEN}},
                       {"name": "tracker", "url": f"http://127.0.0.1:{free_port()}/mcp"}])


def run_once(stack, slack) -> tuple[str, str, str]:
    mention = app_mention_event("What did the team decide about fees?", channel=CHANNEL)
    thread = slack.seed_event(mention)
    assert post_event(stack, mention).status_code == 200
    replies = wait_for(lambda: len(bot_replies(slack, thread)) >= 2 and bot_replies(slack, thread), 15, "run messages")
    report = wait_for(lambda: "Final" in report_text(slack, replies[1].ts) and report_text(slack, replies[1].ts), 60,
                      "the final report")
    return report, block_text(slack.message(CHANNEL, replies[0].ts)), thread


def test_a_run_cites_the_read_only_tool_and_is_never_offered_the_writing_one(
        tmp_path: Path, redis_url, fake_slack, fake_model, fake_web, wiki) -> None:
    fake_model.policy = CiteWhatOneToolFindsPolicy("wiki__lookup", {"title": "Fees"})
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_MCP_SERVERS=servers(wiki)) as stack:
        report, progress, thread = run_once(stack, fake_slack)
    assert "Fees decision" in report and "wiki · lookup" in report, report
    assert wiki.ran == [("lookup", {"title": "Fees"})], "the read-only tool ran, the writing one never did"
    requests = main_requests(fake_model)
    offered = {t["name"] for r in requests for t in r.get("tools", [])}
    assert "wiki__lookup" in offered and not {n for n in offered if "write_page" in n or n.startswith("tracker")}
    opening = requests[0]["messages"][0]["content"][0]["text"]
    assert "could not be reached" in opening and "tracker" in opening, "the opening names the unreachable server"
    assert "MCP server tracker is unreachable" in progress and "wiki" not in progress.split("unreachable")[0][-20:]
    assert WIKI_PAGE[:40] in json.dumps(requests[-1]), "the result reached the model"

    # `deepthread inspect` shows the server's tools with the descriptions the model read.
    redis = Redis.from_url(redis_url)
    shown = io.StringIO()
    assert inspect(redis, RunStore(redis).thread_run_ids(TEAM_ID, CHANNEL, thread)[0], None, shown) == 0
    assert "- wiki__lookup: Tool `lookup` of the team's MCP server `wiki`" in shown.getvalue()
    assert "«Look up a page of the team wiki" in shown.getvalue()


def test_a_server_that_goes_down_mid_run_gives_a_clear_result_and_the_run_ends(
        tmp_path: Path, redis_url, fake_slack, fake_model, fake_web, wiki) -> None:
    fake_model.policy = CiteWhatOneToolFindsPolicy("wiki__lookup", {"title": "Fees"}, before=wiki.stop)
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_MCP_SERVERS=servers(wiki)) as stack:
        _, progress, _ = run_once(stack, fake_slack)
    told = [json.dumps(r["messages"][-1]) for r in main_requests(fake_model) if "could not answer lookup" in json.dumps(r["messages"][-1])]
    assert told and "use other sources" in told[0], "a clear tool result"
    assert progress.startswith("✅ Done"), progress
