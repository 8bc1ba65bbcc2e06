"""Claude through AWS Bedrock and Google Vertex AI: the SDK's own clients, checked at the wire.

Each client's base URL points at the fake (tests/fakes/clouds.py), which checks what the cloud
checks: the model in the path and not in the body, `anthropic_version` in the body, a SigV4
signature recomputed from the secret (or a Bedrock API key), a Google access token; and answers
in the Messages format (Bedrock's streams in AWS's binary event-stream framing).
"""
from __future__ import annotations

import re

import pytest

from agent import AgentConfig, ProviderConfig, ProviderUnavailable, ResearchTask, SearchConfig, model_api, research
from agent.backend import RunBackend
from agent.control import MemoryControl
from agent.events import Finished
from agent.model import ModelClient
from agent.exceptions import ModelUnavailable
from tests.fakes import clouds
from tests.fakes.anthropic import FakeAnthropic, text_reply
from tests.fakes.policies import ResearchPolicy

BEDROCK_MODEL = "us.anthropic.claude-sonnet-5-5-v1:0"
BEDROCK_SMALL = "anthropic.claude-haiku-5-5-v1:0"
VERTEX_MODEL = "claude-sonnet-5-5@20261001"
VERTEX_SMALL = "claude-haiku-5-5@20261001"
SIGV4 = re.compile(r"^AWS4-HMAC-SHA256 Credential=AKIAFAKEDEEPTHREAD01/\d{8}/eu-west-1/bedrock/aws4_request, "
                   r"SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$")


def bedrock(url: str, **overrides: str) -> ProviderConfig:
    fields = dict(provider="bedrock", base_url=url, aws_region="eu-west-1", aws_access_key=clouds.AWS_ACCESS_KEY,
                  aws_secret_key=clouds.AWS_SECRET_KEY)
    return ProviderConfig(**{**fields, **overrides})


def vertex(url: str, **overrides: str) -> ProviderConfig:
    fields = dict(provider="vertex", base_url=f"{url}/v1", vertex_region="us-east5",
                  vertex_project=clouds.VERTEX_PROJECT, vertex_access_token=clouds.VERTEX_TOKEN)
    return ProviderConfig(**{**fields, **overrides})


async def turn_and_small(config: ProviderConfig, main: str, small: str) -> ModelClient:
    async with model_api(config, max_retries=0) as client:
        model = ModelClient(client, main_model=main, small_model=small, timeout=30, provider=config.provider)
        await model.turn(system="s", tools=[], messages=[{"role": "user", "content": "hi"}], max_tokens=100)
        await model.small(system="s", prompt="extract", max_tokens=50)
    return model


async def test_bedrock_requests_are_signed_and_carry_the_model_in_the_path(fake_model: FakeAnthropic) -> None:
    fake_model.policy = lambda request: text_reply("fine")
    model = await turn_and_small(bedrock(fake_model.url), BEDROCK_MODEL, BEDROCK_SMALL)
    (c1, turn_path, turn_headers, turn_body), (c2, small_path, _, small_body) = fake_model.cloud_requests
    assert (c1, c2) == ("bedrock", "bedrock")
    # The main turn is streamed (AWS event-stream framing back), the small call is not.
    assert turn_path == f"/model/{BEDROCK_MODEL}/invoke-with-response-stream"
    assert small_path == f"/model/{BEDROCK_SMALL}/invoke-with-response-stream", "side requests stream too"
    assert SIGV4.match(turn_headers["Authorization"]) and turn_headers["X-Amz-Date"]
    for body in (turn_body, small_body):
        assert body["anthropic_version"] and "model" not in body and "stream" not in body
    # The capability table knows the Bedrock form of Sonnet 5.5: adaptive thinking goes in the body.
    assert turn_body["thinking"] == {"type": "adaptive"} and "thinking" not in small_body
    assert model.usage.requests == 2 and model.usage.output_tokens > 0


async def test_bedrock_refuses_a_wrong_secret_and_the_run_is_told_why(fake_model: FakeAnthropic) -> None:
    with pytest.raises(ModelUnavailable, match="AWS Bedrock refused the request"):
        await turn_and_small(bedrock(fake_model.url, aws_secret_key="wrong"), BEDROCK_MODEL, BEDROCK_SMALL)
    assert fake_model.requests == []  # refused at the signature, before the model


async def test_a_bedrock_api_key_is_sent_as_a_bearer_token_instead_of_a_signature(fake_model: FakeAnthropic) -> None:
    fake_model.policy = lambda request: text_reply("fine")
    await turn_and_small(bedrock(fake_model.url, bedrock_api_key=clouds.BEDROCK_API_KEY), BEDROCK_MODEL, BEDROCK_SMALL)
    headers = fake_model.cloud_requests[0][2]
    assert headers["Authorization"] == f"Bearer {clouds.BEDROCK_API_KEY}" and "X-Amz-Date" not in headers


async def test_bedrock_has_no_token_counting_so_the_size_is_estimated(fake_model: FakeAnthropic) -> None:
    async with model_api(bedrock(fake_model.url)) as client:
        model = ModelClient(client, main_model=BEDROCK_MODEL, small_model=BEDROCK_SMALL, timeout=5, provider="bedrock")
        tokens = await model.count_tokens(system="s" * 400, tools=[], messages=[{"role": "user", "content": "x" * 400}])
    assert 200 <= tokens <= 220 and fake_model.cloud_requests == []


async def test_vertex_requests_carry_the_token_and_route_by_project_region_and_model(fake_model: FakeAnthropic) -> None:
    fake_model.policy = lambda request: text_reply("fine")
    await turn_and_small(vertex(fake_model.url), VERTEX_MODEL, VERTEX_SMALL)
    base = f"/v1/projects/{clouds.VERTEX_PROJECT}/locations/us-east5/publishers/anthropic/models"
    (_, turn_path, headers, turn_body), (_, small_path, _, small_body) = fake_model.cloud_requests
    assert turn_path == f"{base}/{VERTEX_MODEL}:streamRawPredict"
    assert small_path == f"{base}/{VERTEX_SMALL}:streamRawPredict", "side requests stream too"
    assert headers["Authorization"] == f"Bearer {clouds.VERTEX_TOKEN}"
    assert turn_body["anthropic_version"] and "model" not in turn_body and turn_body["stream"] is True
    assert turn_body["thinking"] == {"type": "adaptive"}


async def test_vertex_counts_tokens_at_its_own_route(fake_model: FakeAnthropic) -> None:
    async with model_api(vertex(fake_model.url)) as client:
        model = ModelClient(client, main_model=VERTEX_MODEL, small_model=VERTEX_SMALL, timeout=5, provider="vertex")
        tokens = await model.count_tokens(system="s", tools=[], messages=[{"role": "user", "content": "x" * 400}])
    assert tokens > 100
    assert fake_model.cloud_requests[0][1].endswith("/models/count-tokens:rawPredict")


async def test_a_wrong_vertex_token_is_refused(fake_model: FakeAnthropic) -> None:
    with pytest.raises(ModelUnavailable, match="Google Vertex AI refused"):
        await turn_and_small(vertex(fake_model.url, vertex_access_token="ya29.stale"), VERTEX_MODEL, VERTEX_SMALL)


@pytest.mark.parametrize("provider", ["bedrock", "vertex"])
async def test_a_whole_research_run_works_through_each_cloud(provider: str, fake_model: FakeAnthropic,
                                                             fake_web) -> None:
    fake_model.policy = ResearchPolicy()
    config = AgentConfig(main_model=BEDROCK_MODEL if provider == "bedrock" else VERTEX_MODEL,
                         small_model=BEDROCK_SMALL if provider == "bedrock" else VERTEX_SMALL, provider=provider,
                         search=SearchConfig(provider="searxng", searxng_url=fake_web.url), model_max_retries=0)
    config.fetch.allow = ["127.0.0.1"]
    events: list = []

    async def emit(event) -> None:
        events.append(event)

    provider_config = bedrock(fake_model.url) if provider == "bedrock" else vertex(fake_model.url)
    async with model_api(provider_config) as client:
        outcome = await research(ResearchTask(question="expense ratio VTI SCHB"), config, anthropic=client, emit=emit,
                                 backend=RunBackend(control=MemoryControl()))
    assert outcome.status == "completed" and outcome.summary, outcome
    assert isinstance(events[-1], Finished)
    assert {c for c, *_ in fake_model.cloud_requests} == {provider} and fake_model.rejected == []


@pytest.mark.parametrize(("config", "says"), [
    (ProviderConfig(provider="bedrock"), "AWS_REGION"),
    (ProviderConfig(provider="vertex", vertex_project="p"), "CLOUD_ML_REGION"),
    (ProviderConfig(provider="vertex", vertex_region="us-east5"), "ANTHROPIC_VERTEX_PROJECT_ID"),
    # every missing setting at once, not the first alone
    (ProviderConfig(provider="vertex", vertex_access_token="t"), "CLOUD_ML_REGION .*; ANTHROPIC_VERTEX_PROJECT_ID"),
    (ProviderConfig(provider="bedrock", aws_region="us-east-1", bedrock_api_key="k", aws_profile="p"), None),
])
def test_a_provider_missing_a_setting_says_which(config: ProviderConfig, says: str | None) -> None:
    if says is None:  # a Bedrock API key wins over other AWS credentials (the SDK refuses both)
        assert model_api(config) is not None
        return
    with pytest.raises(ProviderUnavailable, match=says):
        model_api(config)


# ------------------------------------------------ the capability table decides what is sent

@pytest.mark.parametrize(("model", "sent"), [("claude-sonnet-5-5", False), ("claude-sonnet-4-6", True),
                                             ("anthropic.claude-sonnet-5-5-v1:0", False), ("my-gateway", False)])
async def test_a_forced_tool_choice_is_sent_only_to_models_that_take_it(model: str, sent: bool,
                                                                        fake_model: FakeAnthropic) -> None:
    from anthropic import AsyncAnthropic

    from tests.fakes.anthropic import tool_reply

    fake_model.policy = lambda request: tool_reply(("web_search", {"query": "q"}))
    tools = [{"name": "web_search", "description": "search", "input_schema": {"type": "object"}}]
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url, max_retries=0) as client:
        model_client = ModelClient(client, main_model=model, small_model="s", timeout=10, thinking=False)
        await model_client.turn(system="s", tools=tools, messages=[{"role": "user", "content": "hi"}],
                                max_tokens=100, tool_choice={"type": "any"})
    assert ("tool_choice" in fake_model.requests[0]) is sent and fake_model.rejected == []


def test_the_fake_refuses_what_recent_models_refuse(fake_model: FakeAnthropic) -> None:
    import anthropic

    client = anthropic.Anthropic(api_key="k", base_url=fake_model.url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="temperature: not supported by claude-sonnet-5"):
        client.messages.create(model="claude-sonnet-5", max_tokens=5, extra_body={"temperature": 0.2},
                               messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.BadRequestError, match="`any` is not supported by claude-sonnet-5-5"):
        client.messages.create(model="claude-sonnet-5-5", max_tokens=5, tool_choice={"type": "any"},
                               tools=[{"name": "t", "description": "d", "input_schema": {"type": "object"}}],
                               messages=[{"role": "user", "content": "hi"}])


@pytest.mark.parametrize(("model", "canonical"), [
    ("claude-sonnet-5-5", "claude-sonnet-5-5"),
    ("anthropic.claude-sonnet-5-5-v1:0", "claude-sonnet-5-5"),
    ("us.anthropic.claude-sonnet-5-5-v1:0", "claude-sonnet-5-5"),
    ("global.anthropic.claude-opus-4-8-v1", "claude-opus-4-8"),
    ("claude-haiku-4-5@20251001", "claude-haiku-4-5"),
    ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
    ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-5-5-v1:0",
     "claude-sonnet-5-5"),
])
def test_every_providers_form_of_an_id_finds_its_row(model: str, canonical: str) -> None:
    from agent.model_capabilities import canonical_id, capabilities

    assert canonical_id(model) == canonical and capabilities(model).known


def test_prices_follow_the_model_and_an_unknown_id_is_priced_high_and_noticed(caplog) -> None:
    import logging

    from agent import Usage, cost_usd
    from agent.model_capabilities import capabilities

    million = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost_usd("claude-sonnet-5-5", million) == pytest.approx(12.0)  # $2 + $10
    assert cost_usd("claude-haiku-4-5-20251001", million) == pytest.approx(6.0)
    with caplog.at_level(logging.INFO, logger="agent.model_capabilities"):
        unknown = capabilities("some-new-model-x")
        capabilities("some-new-model-x")
    assert not unknown.known and unknown.thinking == "none" and not unknown.server_tools
    assert cost_usd("some-new-model-x", million) == pytest.approx(30.0)  # the highest known: never low
    notices = [r.message for r in caplog.records if "some-new-model-x" in r.message]
    assert len(notices) == 1 and "conservative defaults" in notices[0]
    assert capabilities("claude-sonnet-5-5", "bedrock").server_tools == frozenset()
    assert not capabilities("claude-sonnet-5-5", "bedrock").counts_tokens
