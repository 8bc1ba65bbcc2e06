"""The fakes, proven with the real clients that the project uses against them."""

from __future__ import annotations

import html
import json
import re
import time
import zlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anthropic
import httpx
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply, tool_reply
from tests.fakes.server import ServerThread, free_port
from tests.fakes.slack import FakeSlack, app_mention_event, reaction_added_event, sign
from tests.fakes.web import FakeWeb, Page
from tests.paths import PAGES

MODEL = "claude-test"


# ---------------------------------------------------------------- fixtures


@pytest.fixture
def slack() -> Iterator[tuple[FakeSlack, ServerThread]]:
    fake = FakeSlack()
    with ServerThread(fake.app()) as server:
        yield fake, server


@pytest.fixture
def claude() -> Iterator[tuple[FakeAnthropic, ServerThread]]:
    fake = FakeAnthropic(lambda req: text_reply("hello"))
    with ServerThread(fake.app()) as server:
        yield fake, server


@pytest.fixture
def web_fake() -> Iterator[tuple[FakeWeb, ServerThread]]:
    fake = FakeWeb.from_directory(PAGES, slow_seconds=5)
    with ServerThread(fake.app()) as server:
        yield fake, server


def slack_client(server: ServerThread, **kwargs: Any) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test", base_url=server.url + "/api/", **kwargs)


def claude_client(server: ServerThread, **kwargs: Any) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key="k", base_url=server.url, **kwargs)


# ------------------------------------------------------------------ server


def test_server_thread_serves_sync_and_stops() -> None:
    assert 1024 < free_port() < 65536
    fake = FakeWeb({"/a": Page(b"<title>A</title>hi")})
    with ServerThread(fake.app()) as server:
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert httpx.get(server.url + "/a").text == "<title>A</title>hi"
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/a")


# ------------------------------------------------------------------- slack


async def test_slack_post_update_pin_with_real_client(slack: tuple[FakeSlack, ServerThread]) -> None:
    fake, server = slack
    fake.scopes |= {"pins:read"}  # pins.list checks the fake itself; the bot never lists pins
    client = slack_client(server)
    auth = await client.auth_test()
    assert (auth["user_id"], auth["team_id"], auth["bot_id"]) == ("UBOT", "T0TEST", "BBOT")

    parent = fake.add_user_message("C1", "<@UBOT> what do index funds cost?", "U0ANA")
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*Working…*"}}]
    posted = await client.chat_postMessage(channel="C1", text="Working", blocks=blocks, thread_ts=parent)
    ts = posted["ts"]
    assert posted["message"]["thread_ts"] == parent and float(ts) > float(parent)

    updated = await client.chat_update(channel="C1", ts=ts, text="Done", blocks=[])
    assert updated["text"] == "Done"
    msg = fake.message("C1", ts)
    assert msg is not None and msg.text == "Done" and msg.edits == 1 and msg.history == ["Working"]
    assert msg.blocks is None

    await client.pins_add(channel="C1", timestamp=ts)
    with pytest.raises(SlackApiError) as err:
        await client.pins_add(channel="C1", timestamp=ts)
    assert err.value.response["error"] == "already_pinned"
    assert [m.ts for m in fake.pins("C1")] == [ts]
    assert (await client.pins_list(channel="C1"))["items"][0]["message"]["ts"] == ts

    await client.reactions_add(channel="C1", timestamp=parent, name="eyes")
    with pytest.raises(SlackApiError, match="already_reacted"):
        await client.reactions_add(channel="C1", timestamp=parent, name="eyes")

    with pytest.raises(SlackApiError, match="cant_update_message"):
        await client.chat_update(channel="C1", ts=parent, text="hijack")
    with pytest.raises(SlackApiError, match="message_not_found"):
        await client.chat_update(channel="C1", ts="1.000001", text="x")

    replies = await client.conversations_replies(channel="C1", ts=parent)
    assert [m["ts"] for m in replies["messages"]] == [parent, ts]
    assert [m.ts for m in fake.thread("C1", parent)] == [parent, ts]

    await client.assistant_threads_setStatus(channel_id="C1", thread_ts=parent, status="is reading…")
    assert fake.status_of("C1", parent) == "is reading…"
    eph = await client.chat_postEphemeral(channel="C1", user="U0ANA", text="only you")
    assert fake.ephemerals("C1")[0].message_ts == eph["message_ts"]
    assert [m for m, _ in fake.calls][:2] == ["auth.test", "chat.postMessage"]
    assert fake.calls_of("pins.add")[0] == {"channel": "C1", "timestamp": ts}


async def test_slack_auth_and_limits(slack: tuple[FakeSlack, ServerThread]) -> None:
    fake, server = slack
    with pytest.raises(SlackApiError, match="invalid_auth"):
        await AsyncWebClient(token="xoxp-user", base_url=server.url + "/api/").auth_test()
    no_token = httpx.post(server.url + "/api/auth.test").json()
    assert no_token == {"ok": False, "error": "not_authed"}
    assert httpx.post(server.url + "/api/no.such", headers={"Authorization": "Bearer xoxb-1"}).json()["error"] \
        == "unknown_method"

    client = slack_client(server)
    with pytest.raises(SlackApiError, match="msg_too_long"):
        await client.chat_postMessage(channel="C1", text="x" * 40_001)
    with pytest.raises(SlackApiError, match="invalid_blocks"):
        await client.chat_postMessage(channel="C1", text="t", blocks=[{"type": "divider"}] * 51)
    section = {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3_001}}
    with pytest.raises(SlackApiError, match="invalid_blocks"):
        await client.chat_postMessage(channel="C1", text="t", blocks=[section])
    markdown = [{"type": "markdown", "text": "y" * 6_001}] * 2
    with pytest.raises(SlackApiError, match="invalid_blocks"):
        await client.chat_postMessage(channel="C1", text="t", blocks=markdown)
    five = [{"type": "section", "text": {"type": "mrkdwn", "text": "z" * 2_700}}] * 5
    with pytest.raises(SlackApiError, match="msg_blocks_too_long"):
        await client.chat_postMessage(channel="C1", text="t", blocks=five)
    with pytest.raises(SlackApiError, match="channel_not_found"):
        await client.chat_postMessage(channel="", text="t")
    # Blocks as a JSON string (form-style) are read too.
    ok = await client.api_call("chat.postMessage", data={"channel": "C1", "text": "t",
                                                          "blocks": json.dumps([{"type": "divider"}])})
    assert fake.message("C1", ok["ts"]).blocks == [{"type": "divider"}]  # type: ignore[union-attr]


async def test_slack_429_retry_after_is_honoured(slack: tuple[FakeSlack, ServerThread]) -> None:
    fake, server = slack
    client = slack_client(server, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)])
    fake.fail_next("chat.update", retry_after=1)
    ts = (await client.chat_postMessage(channel="C1", text="a"))["ts"]
    started = time.monotonic()
    await client.chat_update(channel="C1", ts=ts, text="b")
    assert time.monotonic() - started >= 1.0
    assert fake.count_429 == {"chat.update": 1}
    assert len(fake.calls_of("chat.update")) == 2
    assert fake.message("C1", ts).text == "b"  # type: ignore[union-attr]

    fake.fail_next("chat.update", error="edit_window_closed")
    with pytest.raises(SlackApiError, match="edit_window_closed"):
        await client.chat_update(channel="C1", ts=ts, text="c")

    fake.set_rate_limit("pins.add", 1)
    await client.pins_add(channel="C1", timestamp=ts)
    raw = httpx.post(server.url + "/api/pins.add", headers={"Authorization": "Bearer xoxb-test"},
                     data={"channel": "C1", "timestamp": ts})
    assert raw.status_code == 429 and 1 <= int(raw.headers["Retry-After"]) <= 60
    assert raw.json() == {"ok": False, "error": "ratelimited"}


async def test_slack_files_upload_v2(slack: tuple[FakeSlack, ServerThread]) -> None:
    fake, server = slack
    client = slack_client(server)
    parent = fake.add_user_message("C1", "question", "U0ANA")
    resp = await client.files_upload_v2(channel="C1", thread_ts=parent, content="# Report\nlong text",
                                        filename="report.md", title="Report", initial_comment="Full report")
    file_id = resp["file"]["id"]
    [f] = fake.files()
    assert (f.id, f.content, f.title, f.thread_ts, f.completed) == (file_id, b"# Report\nlong text", "Report",
                                                                    parent, True)
    assert fake.thread("C1", parent)[-1].files == [file_id]
    await client.files_delete(file=file_id)
    assert fake.files() == []


def test_event_builders_and_signature() -> None:
    env = app_mention_event("compare VTI and SCHB", thread_ts="1700000000.000100")
    event = env["event"]
    assert env["type"] == "event_callback" and env["event_id"].startswith("Ev")
    assert event["text"] == "<@UBOT> compare VTI and SCHB" and event["thread_ts"] == "1700000000.000100"
    assert env["authorizations"][0]["user_id"] == "UBOT"
    assert app_mention_event("x")["event_id"] != app_mention_event("x")["event_id"]
    reaction = reaction_added_event("x", user="U0ANA", item_channel="C1", item_ts="1.2", item_user="UBOT")
    assert reaction["event"]["item"] == {"type": "message", "channel": "C1", "ts": "1.2"}

    from slack_sdk.signature import SignatureVerifier

    body = json.dumps(env).encode()
    headers = sign("s3cret", body)
    assert SignatureVerifier("s3cret").is_valid_request(body, headers)
    assert not SignatureVerifier("other").is_valid_request(body, headers)


# --------------------------------------------------------------- anthropic


TOOLS = [{"name": "web_search", "description": "Search the web.",
          "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}]


async def test_anthropic_create_and_stream_with_real_sdk(claude: tuple[FakeAnthropic, ServerThread]) -> None:
    fake, server = claude
    async with claude_client(server) as client:
        msg = await client.messages.create(model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}])
        assert msg.content[0].text == "hello" and msg.stop_reason == "end_turn"  # type: ignore[union-attr]
        assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
        assert fake.requests[0]["messages"] == [{"role": "user", "content": "hi"}]

        fake.policy = lambda req: tool_reply(("web_search", {"query": "VTI expense ratio", "n": [1, 2]}),
                                             text="Let me look that up.")
        async with client.messages.stream(model=MODEL, max_tokens=100, tools=TOOLS,  # type: ignore[arg-type]
                                          messages=[{"role": "user", "content": "What does VTI cost?"}]) as stream:
            final = await stream.get_final_message()
        assert final.stop_reason == "tool_use"
        assert final.content[0].text == "Let me look that up."  # type: ignore[union-attr]
        call = final.content[1]
        assert call.type == "tool_use" and call.name == "web_search" and call.id.startswith("toolu_")
        assert call.input == {"query": "VTI expense ratio", "n": [1, 2]}

        # The SDK can send that turn straight back with a result.
        fake.policy = lambda req: Reply([{"type": "text", "text": "0.03%"}])
        history = [
            {"role": "user", "content": "What does VTI cost?"},
            {"role": "assistant", "content": [b.model_dump() for b in final.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "0.03%"}]},
        ]
        again = await client.messages.create(model=MODEL, max_tokens=100, tools=TOOLS,  # type: ignore[arg-type]
                                             messages=history)  # type: ignore[arg-type]
        assert again.content[0].text == "0.03%"  # type: ignore[union-attr]
        counted = await client.messages.count_tokens(model=MODEL, messages=history)  # type: ignore[arg-type]
        assert counted.input_tokens > 0


async def test_anthropic_rejects_bad_requests(claude: tuple[FakeAnthropic, ServerThread]) -> None:
    fake, server = claude
    async with claude_client(server, max_retries=0) as client:
        dangling = [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "web_search",
                                               "input": {}}]},
            {"role": "user", "content": "never mind"},
        ]
        with pytest.raises(anthropic.BadRequestError, match="toolu_1"):
            await client.messages.create(model=MODEL, max_tokens=10, tools=TOOLS,  # type: ignore[arg-type]
                                         messages=dangling)  # type: ignore[arg-type]
        five = [{"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]
        with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks with cache_control"):
            await client.messages.create(model=MODEL, max_tokens=10,
                                         messages=[{"role": "user", "content": five}])  # type: ignore[list-item]
        with pytest.raises(anthropic.BadRequestError, match="roles must alternate"):
            await client.messages.create(model=MODEL, max_tokens=10, messages=[
                {"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        assert len(fake.rejected) == 3 and fake.requests == []

        no_key = httpx.post(server.url + "/v1/messages", json={})
        assert no_key.status_code == 401 and no_key.json()["error"]["type"] == "authentication_error"


async def test_anthropic_retries_and_failures(claude: tuple[FakeAnthropic, ServerThread]) -> None:
    fake, server = claude
    async with claude_client(server, max_retries=2) as client:
        fake.fail_next(500, retry_after=0.01)
        msg = await client.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        assert msg.content[0].text == "hello"  # type: ignore[union-attr]
        assert len(fake.requests) == 1 and fake.served_failures == [500]

        fake.fail_always(529)
        with pytest.raises(anthropic.OverloadedError):
            await client.with_options(max_retries=0).messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        fake.clear_failures()

        def broken(req: dict[str, Any]) -> Reply:
            raise KeyError("oops")

        fake.policy = broken
        with pytest.raises(anthropic.InternalServerError, match="oops"):
            await client.with_options(max_retries=0).messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        assert isinstance(fake.policy_errors[0], KeyError)

        fake.policy = lambda req: text_reply("late")
        fake.fail_next_stream()
        with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
            async with client.messages.stream(model=MODEL, max_tokens=10,
                                              messages=[{"role": "user", "content": "hi"}]) as stream:
                await stream.get_final_message()
        fake.delay = 1.0
        with pytest.raises(anthropic.APITimeoutError):
            await client.with_options(max_retries=0, timeout=0.2).messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}])


async def test_anthropic_prompt_cache_usage(claude: tuple[FakeAnthropic, ServerThread]) -> None:
    fake, server = claude
    async with claude_client(server) as client:
        system = [{"type": "text", "text": "You are a careful researcher. " * 200, "cache_control": {"type": "ephemeral"}}]
        first = await client.messages.create(model=MODEL, max_tokens=10, system=system,  # type: ignore[arg-type]
                                             messages=[{"role": "user", "content": "q1"}])
        assert first.usage.cache_read_input_tokens == 0 and first.usage.cache_creation_input_tokens > 1024
        second = await client.messages.create(model=MODEL, max_tokens=10, system=system,  # type: ignore[arg-type]
                                              messages=[{"role": "user", "content": "another question"}])
        assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
        assert second.usage.cache_creation_input_tokens == 0 and second.usage.input_tokens > 0


# --------------------------------------------------------------------- web


def test_web_pages_and_search(web_fake: tuple[FakeWeb, ServerThread]) -> None:
    fake, server = web_fake
    page = httpx.get(server.url + "/pages/etf-fees.html")
    assert page.status_code == 200 and "VTI has an expense ratio of 0.03%" in page.text
    assert page.headers["content-type"] == "text/html; charset=utf-8"

    data = httpx.get(server.url + "/search", params={"q": "VTI expense ratio", "format": "json"}).json()
    assert data["query"] == "VTI expense ratio"
    top = data["results"][0]
    assert top["url"] == server.url + "/pages/etf-fees.html"
    assert top["title"].startswith("What Total-Market Index Funds") and top["publishedDate"] is None
    assert "VTI" in top["content"] and len(top["content"]) <= 210
    assert all("ocean" not in r["url"] for r in data["results"])
    nothing = httpx.get(server.url + "/search", params={"q": "zyzzyva", "format": "json"}).json()
    assert nothing["results"] == []

    ddg = httpx.post(server.url + "/html/", data={"q": "tracking error"}).text
    assert 'class="result results_links results_links_deep web-result' in ddg
    first_link = re.search(r'<a rel="nofollow" class="result__a" href="([^"]+)">(.*?)</a>', ddg)
    assert first_link is not None
    target = parse_qs(urlsplit(html.unescape(first_link.group(1))).query)["uddg"][0]
    assert target == server.url + "/pages/tracking-error.html"
    assert "<b>Tracking</b> <b>Error</b>" in first_link.group(2)
    assert re.search(r'<a class="result__snippet" href="[^"]+">.*<b>tracking</b>', ddg, re.I)
    assert 'class="no-results"' in httpx.get(server.url + "/html/", params={"q": "zyzzyva"}).text

    fake.search_fail_next(429, retry_after=3)
    limited = httpx.get(server.url + "/search", params={"q": "vti", "format": "json"})
    assert limited.status_code == 429 and limited.headers["retry-after"] == "3"
    assert "/pages/etf-fees.html" in fake.hits


def test_web_hostile_routes(web_fake: tuple[FakeWeb, ServerThread]) -> None:
    fake, server = web_fake
    with httpx.Client(base_url=server.url, follow_redirects=True) as client:
        assert client.get("/redirect/3").text.count("Redirect target") >= 1
        assert fake.hits[-4:] == ["/redirect/3", "/redirect/2", "/redirect/1", "/redirect/0"]
        target = client.get("/redirect-to", params={"url": "/pages/ocean-heat.html"})
        assert "zettajoules" in target.text

        with pytest.raises(httpx.ReadTimeout):
            client.get("/slow", timeout=httpx.Timeout(5.0, read=0.3))

        with client.stream("GET", "/huge") as resp:
            assert "content-length" not in resp.headers
            got = 0
            for chunk in resp.iter_bytes():
                got += len(chunk)
                if got > 1_000_000:
                    break
        assert got > 1_000_000

        binary = client.get("/binary")
        assert binary.headers["content-type"] == "application/octet-stream" and len(binary.content) > 1000

        latin = client.get("/latin1")
        assert "ISO-8859-1" in latin.headers["content-type"]
        assert "Grüße".encode() in latin.content

    # Reading .content would inflate 200 MB; read the wire bytes instead.
    with httpx.stream("GET", server.url + "/gzip-bomb") as resp:
        assert resp.headers["content-encoding"] == "gzip"
        wire = b"".join(resp.iter_raw())
    assert len(wire) < 1_000_000
    head = zlib.decompressobj(31).decompress(wire, 1000)
    assert head.startswith(b"<!doctype html>")


async def test_anthropic_reports_and_enforces_the_organizations_rate_limits(
    claude: tuple[FakeAnthropic, ServerThread],
) -> None:
    fake, server = claude
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    async with claude_client(server, max_retries=0) as client:
        raw = await client.messages.with_raw_response.create(**body)
        headers = raw.headers
        for name in ("requests", "input-tokens", "output-tokens", "tokens"):
            for part in ("limit", "remaining", "reset"):
                assert f"anthropic-ratelimit-{name}-{part}" in headers, (name, part)
        assert int(headers["anthropic-ratelimit-requests-remaining"]) < int(headers["anthropic-ratelimit-requests-limit"])
        assert int(headers["anthropic-ratelimit-input-tokens-remaining"]) % 1000 == 0, "rounded to the thousand"
        assert headers["anthropic-ratelimit-requests-reset"].endswith("Z")

        fake.limit(requests=2)  # enforced from now on: two requests a minute
        await client.messages.create(**body)
        await client.messages.create(**body)
        with pytest.raises(anthropic.RateLimitError) as refused:
            await client.messages.create(**body)
    assert refused.value.response.headers["retry-after"] == "30"
    assert refused.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert refused.value.body["error"]["type"] == "rate_limit_error"
    assert fake.limits.rate_limited == 1
