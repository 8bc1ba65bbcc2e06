"""Where the model is bought: the Anthropic API (or any compatible endpoint), AWS Bedrock or
Google Vertex AI, each through the SDK's own client, made from typed settings here.

The three clients speak the same Messages interface (`messages.create`, `messages.stream`); what
differs is the wire: Bedrock signs each request with SigV4 (or takes a Bedrock API key) and puts
the model in the path (`/model/{id}/invoke-with-response-stream`), Vertex sends a Google access
token and routes by project, region and model (`…/models/{id}:streamRawPredict`), and both carry
`anthropic_version` in the body. Bedrock's client needs the optional `boto3`/`botocore`
(`pip install 'deepthread[bedrock]'`), Vertex's `google-auth` unless an access token is given
(`'deepthread[vertex]'`). Credentials not given here are found the SDKs' usual ways (AWS's
credential chain, Google's application default credentials).
"""

from __future__ import annotations

from typing import TypeAlias

from anthropic import AsyncAnthropic, AsyncAnthropicBedrock, AsyncAnthropicVertex, DefaultAsyncHttpxClient

from .provider_config import ProviderConfig, ProviderUnavailable
from .tls import verified

__all__ = ["ModelAPI", "ProviderConfig", "ProviderUnavailable", "model_api"]

ModelAPI: TypeAlias = AsyncAnthropic | AsyncAnthropicBedrock | AsyncAnthropicVertex


def model_api(config: ProviderConfig, *, max_retries: int | None = None, timeout: float | None = None) -> ModelAPI:
    """The SDK client for `config.provider`; ProviderUnavailable says what is missing."""
    # The SDK's own client settings, with the process's one TLS context (agent/tls.py).
    extra: dict[str, object] = {"http_client": DefaultAsyncHttpxClient(verify=verified())}
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
    try:
        import botocore  # noqa: F401  # the SDK imports it lazily, at the first request: fail here instead
    except ImportError as exc:
        raise ProviderUnavailable(
            "DEEPTHREAD_MODEL_PROVIDER=bedrock needs boto3: pip install 'deepthread[bedrock]'"
        ) from exc
    if not config.aws_region:
        raise ProviderUnavailable(
            "DEEPTHREAD_MODEL_PROVIDER=bedrock needs a region: set AWS_REGION (e.g. us-east-1), the region "
            "where the models are enabled"
        )
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
    if not config.vertex_access_token:
        try:
            import google.auth  # noqa: F401  # application default credentials
        except ImportError as exc:
            raise ProviderUnavailable(
                "DEEPTHREAD_MODEL_PROVIDER=vertex needs google-auth: pip install 'deepthread[vertex]'"
            ) from exc
    if not config.vertex_region:
        raise ProviderUnavailable(
            "DEEPTHREAD_MODEL_PROVIDER=vertex needs a region: set CLOUD_ML_REGION (e.g. us-east5, or global)"
        )
    if not config.vertex_project:
        raise ProviderUnavailable(
            "DEEPTHREAD_MODEL_PROVIDER=vertex needs a project: set ANTHROPIC_VERTEX_PROJECT_ID to the Google "
            "Cloud project where Claude is enabled"
        )
    try:
        return AsyncAnthropicVertex(
            region=config.vertex_region,
            project_id=config.vertex_project,
            access_token=config.vertex_access_token,
            base_url=config.base_url,
            **extra,  # type: ignore[arg-type]
        )
    except ValueError as exc:
        raise ProviderUnavailable(f"DEEPTHREAD_MODEL_PROVIDER=vertex: {exc}") from exc
