"""Where the model is bought: the Anthropic API (or any compatible endpoint), AWS Bedrock or
Google Vertex AI, each through the SDK's own client, made from typed settings here.

The three clients speak the same Messages interface (`messages.create`, `messages.stream`); what
differs is the wire: Bedrock signs each request with SigV4 (or takes a Bedrock API key) and puts
the model in the path (`/model/{id}/invoke-with-response-stream`), Vertex sends a Google access
token and routes by project, region and model (`…/models/{id}:streamRawPredict`), and both carry
`anthropic_version` in the body. Bedrock's client needs the optional `boto3`/`botocore`
(`pip install 'deepthread[bedrock]'`), Vertex's `google-auth` unless an access token is given
(`'deepthread[vertex]'`). Credentials not given here are found the SDKs' usual ways (AWS's
credential chain, Google's application default credentials). Every client gives up on a service that
sends nothing (agent/silence.py).
"""

from __future__ import annotations

from typing import TypeAlias

from anthropic import AsyncAnthropic, AsyncAnthropicBedrock, AsyncAnthropicVertex

from .provider_config import ProviderConfig, ProviderUnavailable, provider_problems
from .silence import ModelWatch, Silence, silence_guarded_client
from .tls import verified

__all__ = ["ModelAPI", "ProviderConfig", "ProviderUnavailable", "model_api"]

ModelAPI: TypeAlias = AsyncAnthropic | AsyncAnthropicBedrock | AsyncAnthropicVertex


def model_api(
    config: ProviderConfig,
    *,
    max_retries: int | None = None,
    timeout: float | None = None,
    silence: Silence | None = None,
    watch: ModelWatch | None = None,
) -> ModelAPI:
    """The SDK client for `config.provider`; ProviderUnavailable says everything that is missing.
    `silence`: how long a request may go without a byte (the defaults when None); `watch` is told of
    every request in flight."""
    problems = provider_problems(config)
    if problems:
        raise ProviderUnavailable("; ".join(problems))
    # The SDK's own client settings, with the process's one TLS context (agent/tls.py).
    http = silence_guarded_client(silence or Silence(), watch, verify=verified())
    extra: dict[str, object] = {"http_client": http}
    if max_retries is not None:
        extra["max_retries"] = max_retries
    if timeout is not None:
        extra["timeout"] = timeout
    if config.provider == "bedrock":
        return _bedrock(config, extra)
    if config.provider == "vertex":
        return _vertex(config, extra)
    return AsyncAnthropic(api_key=config.api_key, base_url=config.base_url, **extra)  # type: ignore[arg-type]


def _bedrock(config: ProviderConfig, extra: dict[str, object]) -> AsyncAnthropicBedrock:
    keys = {
        "aws_access_key": config.aws_access_key,
        "aws_secret_key": config.aws_secret_key,
        "aws_session_token": config.aws_session_token,
        "aws_profile": config.aws_profile,
    }
    # A Bedrock API key and AWS credentials are two ways to sign in: the SDK refuses both at once.
    signing = {} if config.bedrock_api_key else {k: v for k, v in keys.items() if v}
    try:
        return AsyncAnthropicBedrock(
            aws_region=config.aws_region,
            api_key=config.bedrock_api_key,
            base_url=config.base_url,
            **signing,  # type: ignore[arg-type]
            **extra,  # type: ignore[arg-type]
        )
    except ValueError as exc:
        raise ProviderUnavailable(f"DEEPTHREAD_MODEL_PROVIDER=bedrock: {exc}") from exc


def _vertex(config: ProviderConfig, extra: dict[str, object]) -> AsyncAnthropicVertex:
    region, project = config.vertex_region, config.vertex_project
    if not (region and project):  # model_api refused already with what is missing; this tells mypy
        raise ProviderUnavailable("; ".join(provider_problems(config)))
    try:
        return AsyncAnthropicVertex(
            region=region,
            project_id=project,
            access_token=config.vertex_access_token,
            base_url=config.base_url,
            **extra,  # type: ignore[arg-type]
        )
    except ValueError as exc:
        raise ProviderUnavailable(f"DEEPTHREAD_MODEL_PROVIDER=vertex: {exc}") from exc
