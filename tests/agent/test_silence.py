"""A model service that sends nothing is given up on: no first byte within `first_byte`, or no next stream
event within `between_events`; a slow but live stream is not (the waits are silences, not a total)."""
from __future__ import annotations

import asyncio

import pytest

from agent import ModelWatch, ProviderConfig, Silence, model_api
from agent.exceptions import ModelUnavailable
from agent.model import ModelClient
from tests.fakes.anthropic import FakeAnthropic, text_reply
from tests.fakes.silent import SilentServer

QUICK = Silence(first_byte=0.5, between_events=0.4)


def client(url: str, silence: Silence = QUICK, watch: ModelWatch | None = None, retries: int = 0) -> ModelClient:
    api = model_api(ProviderConfig(api_key="k", base_url=url), max_retries=retries, silence=silence, watch=watch)
    return ModelClient(api, main_model="claude-sonnet-5-5", small_model="claude-haiku-5-5", timeout=300)


async def test_no_first_byte_ends_the_call_naming_the_endpoint_and_what_to_try() -> None:
    with SilentServer() as silent:
        with pytest.raises(ModelUnavailable) as raised:
            await client(silent.url).small(system="s", prompt="p", max_tokens=10)
    said = str(raised.value)
    assert said.startswith(f"the model endpoint {silent.url}/v1/messages sent nothing for 0.5 s (one try)"), said
    assert "DEEPTHREAD_MODEL_FIRST_BYTE_SECONDS" in said and "ANTHROPIC_BASE_URL" in said


async def test_a_stream_that_stops_mid_way_is_given_up_between_events(fake_model: FakeAnthropic) -> None:
    fake_model.policy = lambda request: text_reply("a long enough answer to come in several pieces " * 3)
    fake_model.stream_delay = 1.0  # the headers come at once; then a second between events
    with pytest.raises(ModelUnavailable, match="DEEPTHREAD_MODEL_STREAM_IDLE_SECONDS"):
        await client(fake_model.url).small(system="s", prompt="p", max_tokens=100)


async def test_a_slow_but_live_stream_is_read_to_its_end(fake_model: FakeAnthropic) -> None:
    """Each event within the silence allowed, the whole answer well past it: a silence, not a total."""
    fake_model.policy = lambda request: text_reply("a long enough answer to come in several pieces " * 3)
    fake_model.stream_delay = 0.15
    answer = await client(fake_model.url).small(system="s", prompt="p", max_tokens=100)
    assert answer.startswith("a long enough answer")


async def test_after_a_silent_call_the_next_is_tried_once_until_one_is_answered(fake_model: FakeAnthropic) -> None:
    """Three tries for the first silent call (the SDK's retries), one for the next: a silent endpoint ends a
    run in seconds; an answer restores the retries."""
    fake_model.policy = lambda request: text_reply("ok")
    model = client(fake_model.url, retries=2)
    fake_model.delay = 1.0  # past first_byte: silent
    for tries in ("3 tries", "one try"):
        with pytest.raises(ModelUnavailable, match=tries):
            await model.small(system="s", prompt="p", max_tokens=10)
    fake_model.delay = 0
    assert await model.small(system="s", prompt="p", max_tokens=10) == "ok"
    fake_model.delay = 1.0
    with pytest.raises(ModelUnavailable, match="3 tries"):
        await model.small(system="s", prompt="p", max_tokens=10)


async def test_the_watch_names_the_request_in_flight_until_it_ends(fake_model: FakeAnthropic) -> None:
    fake_model.policy = lambda request: text_reply("ok")
    fake_model.delay = 0.3
    watch = ModelWatch()
    model = client(fake_model.url, silence=Silence(first_byte=5, between_events=5), watch=watch)
    call = asyncio.create_task(model.small(system="s", prompt="p", max_tokens=10))
    await asyncio.sleep(0.1)
    waiting = watch.quietest()
    assert waiting is not None and waiting.url == f"{fake_model.url}/v1/messages" and waiting.last_byte is None
    assert await call == "ok"
    assert watch.quietest() is None
