"""The fake Messages API enforces the rules a real model service holds the client to: thinking
blocks signed and unmodified, the current tool loop's thinking kept, no forced tool use while
thinking; server tools validated and answered in the wire format. Proven with the real SDK."""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import anthropic
import pytest

from tests.fakes.anthropic import FakeAnthropic, Reply, tool_reply

MODEL = "claude-sonnet-5-5"
TOOLS = [{"name": "web_search", "description": "search", "input_schema": {"type": "object"}}]
THINKING = {"type": "adaptive"}


def first_turn(fake_model: FakeAnthropic) -> list[dict[str, Any]]:
    """One thinking + tool_use turn from the fake, and the conversation to send back after it."""
    fake_model.thinker = lambda request: "I should search first."
    fake_model.policy = lambda request: tool_reply(("web_search", {"query": "VTI"}))
    client = anthropic.Anthropic(api_key="k", base_url=fake_model.url, max_retries=0)
    message = client.messages.create(model=MODEL, max_tokens=2000, tools=TOOLS, thinking=THINKING,
                                     messages=[{"role": "user", "content": "VTI fee?"}])
    assistant = [block.model_dump(exclude_none=True) for block in message.content]
    call = next(b for b in assistant if b["type"] == "tool_use")
    return [{"role": "user", "content": "VTI fee?"}, {"role": "assistant", "content": assistant},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "0.03%"}]}]


def drop_thinking(messages: list[dict[str, Any]]) -> None:
    messages[1]["content"] = [b for b in messages[1]["content"] if b["type"] != "thinking"]


def edit_thinking(messages: list[dict[str, Any]]) -> None:
    messages[1]["content"][0]["thinking"] += " (edited)"


def drop_signature(messages: list[dict[str, Any]]) -> None:
    del messages[1]["content"][0]["signature"]


def move_thinking_last(messages: list[dict[str, Any]]) -> None:
    messages[1]["content"] = messages[1]["content"][1:] + messages[1]["content"][:1]


@pytest.mark.parametrize(("tamper", "says"), [
    (drop_thinking, "a final `assistant` message must start with a thinking block"),
    (move_thinking_last, "a final `assistant` message must start with a thinking block"),
    (edit_thinking, "Invalid `signature` in `thinking` block"),
    (drop_signature, "thinking.signature: Field required"),
])
def test_thinking_sent_back_altered_is_refused(fake_model: FakeAnthropic,
                                               tamper: Callable[[list[dict[str, Any]]], None], says: str) -> None:
    messages = first_turn(fake_model)
    client = anthropic.Anthropic(api_key="k", base_url=fake_model.url, max_retries=0)
    # Unaltered, the next turn is accepted.
    client.messages.create(model=MODEL, max_tokens=2000, tools=TOOLS, thinking=THINKING,
                           messages=copy.deepcopy(messages))
    tamper(messages)
    with pytest.raises(anthropic.BadRequestError, match=says):
        client.messages.create(model=MODEL, max_tokens=2000, tools=TOOLS, thinking=THINKING, messages=messages)


def test_old_thinking_may_be_dropped_once_the_tool_loop_is_over(fake_model: FakeAnthropic) -> None:
    messages = first_turn(fake_model)
    drop_thinking(messages)
    messages[2]["content"].append({"type": "text", "text": "thanks"})
    messages += [{"role": "assistant", "content": "VTI costs 0.03%."}, {"role": "user", "content": "And SCHB?"}]
    client = anthropic.Anthropic(api_key="k", base_url=fake_model.url, max_retries=0)
    client.messages.create(model=MODEL, max_tokens=2000, tools=TOOLS, thinking=THINKING, messages=messages)


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "web_search"}])
def test_forced_tool_use_while_thinking_is_refused(fake_model: FakeAnthropic, choice: dict[str, Any]) -> None:
    # An older model that takes a forced tool choice without thinking (recent ones refuse it outright).
    client = anthropic.Anthropic(api_key="k", base_url=fake_model.url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="tool_choice forces tool use"):
        client.messages.create(model="claude-sonnet-4-6", max_tokens=2000, tools=TOOLS, thinking=THINKING, tool_choice=choice,
                               messages=[{"role": "user", "content": "hi"}])


@pytest.mark.parametrize(("thinking", "says"), [
    ({"type": "enabled", "budget_tokens": 500}, "greater than or equal to 1024"),
    ({"type": "enabled", "budget_tokens": 4000}, "`max_tokens` must be greater than `thinking.budget_tokens`"),
    ({"type": "sometimes"}, "does not match any of the expected tags"),
])
def test_a_malformed_thinking_parameter_is_refused(fake_model: FakeAnthropic, thinking: dict[str, Any],
                                                   says: str) -> None:
    client = anthropic.Anthropic(api_key="k", base_url=fake_model.url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match=says):
        client.messages.create(model=MODEL, max_tokens=2000, thinking=thinking,  # type: ignore[arg-type]
                               messages=[{"role": "user", "content": "hi"}])


def test_thinking_streams_as_deltas_with_its_signature(fake_model: FakeAnthropic) -> None:
    fake_model.thinker = lambda request: "Let me think about the fee table carefully."
    client = anthropic.Anthropic(api_key="k", base_url=fake_model.url, max_retries=0)
    with client.messages.stream(model=MODEL, max_tokens=2000, thinking=THINKING,
                                messages=[{"role": "user", "content": "hi"}]) as stream:
        kinds = [event.type for event in stream]
        message = stream.get_final_message()
    assert "thinking" in kinds and "signature" in kinds
    block = message.content[0]
    assert block.type == "thinking" and block.signature == fake_model.signature(block.thinking)
    assert message.usage.output_tokens_details is not None and message.usage.output_tokens_details.thinking_tokens > 0


# ------------------------------------------------------------ server tools

SEARCH_TOOL = {"type": "web_search_20260209", "name": "web_search", "max_uses": 1}


def test_a_server_search_is_answered_in_the_wire_format(fake_model: FakeAnthropic) -> None:
    client = anthropic.Anthropic(api_key="k", base_url=fake_model.url, max_retries=0)
    message = client.messages.create(model="claude-haiku-5-5", max_tokens=500, tools=[SEARCH_TOOL],
                                     messages=[{"role": "user", "content": "<query>VTI fee</query>"}])
    kinds = [b.type for b in message.content]
    assert kinds[:3] == ["text", "server_tool_use", "web_search_tool_result"] and kinds[3:] == ["text"] * 3
    use, result = message.content[1], message.content[2]
    assert use.id.startswith("srvtoolu_") and result.tool_use_id == use.id and use.input == {"query": "VTI fee"}
    assert [r.type for r in result.content] == ["web_search_result"] * 3  # type: ignore[union-attr]
    cited = message.content[3].citations[0]  # type: ignore[union-attr, index]
    assert cited.type == "web_search_result_location" and cited.url == result.content[0].url  # type: ignore[union-attr, index]
    assert message.usage.server_tool_use is not None and message.usage.server_tool_use.web_search_requests == 1


def test_a_second_search_past_max_uses_answers_max_uses_exceeded(fake_model: FakeAnthropic) -> None:
    fake_model.search_policy = lambda request: (
        Reply([{"type": "server_tool_use", "name": "web_search", "input": {"query": q}} for q in ("a", "b")],
              "end_turn") if request["messages"][-1]["role"] == "user" else Reply([{"type": "text", "text": "done"}]))
    client = anthropic.Anthropic(api_key="k", base_url=fake_model.url, max_retries=0)
    message = client.messages.create(model="claude-haiku-5-5", max_tokens=500, tools=[SEARCH_TOOL],
                                     messages=[{"role": "user", "content": "search twice"}])
    results = [b for b in message.content if b.type == "web_search_tool_result"]
    assert isinstance(results[0].content, list)
    assert results[1].content.error_code == "max_uses_exceeded"  # type: ignore[union-attr]
    assert fake_model.searches == ["a"]


@pytest.mark.parametrize(("tool", "says"), [
    ({**SEARCH_TOOL, "allowed_domains": ["a.org"], "blocked_domains": ["b.org"]}, "cannot be used together"),
    ({**SEARCH_TOOL, "max_uses": 0}, "max_uses: Input should be greater than 0"),
    ({**SEARCH_TOOL, "name": "search"}, "name: Input should be 'web_search'"),
    ({"type": "web_search_20990101", "name": "web_search"}, "does not match any of the expected tags"),
])
def test_a_malformed_server_tool_is_refused(fake_model: FakeAnthropic, tool: dict[str, Any], says: str) -> None:
    client = anthropic.Anthropic(api_key="k", base_url=fake_model.url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match=says):
        client.messages.create(model="claude-haiku-5-5", max_tokens=500, tools=[tool],  # type: ignore[list-item]
                               messages=[{"role": "user", "content": "q"}])
