"""The model provider's settings (DEEPTHREAD_MODEL_PROVIDER and what each needs), apart from the
clients model_provider.py makes from them: settings are read where the SDK is never loaded."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec

from pydantic import BaseModel, ConfigDict, Field

from . import defaults
from .model_capabilities import Provider

__all__ = ["ProviderConfig", "ProviderUnavailable", "Silence", "provider_problems"]


@dataclass(frozen=True)
class Silence:
    """How long a model request may go without a byte: before its answer starts, then between the
    events of its stream (agent/silence.py gives up past either)."""

    first_byte: float = defaults.MODEL_FIRST_BYTE_SECONDS
    between_events: float = defaults.MODEL_STREAM_IDLE_SECONDS


class ProviderUnavailable(Exception):
    """The provider cannot be used as configured; the message says what to install or set."""


class ProviderConfig(BaseModel):
    """DEEPTHREAD_MODEL_PROVIDER and what that provider needs (None: the SDK's own default)."""

    model_config = ConfigDict(frozen=True)

    provider: Provider = "anthropic"
    api_key: str | None = Field(default=None, repr=False)  # ANTHROPIC_API_KEY
    base_url: str | None = None  # ANTHROPIC_BASE_URL, or the provider's own override
    # Bedrock
    aws_region: str | None = None
    aws_access_key: str | None = Field(default=None, repr=False)
    aws_secret_key: str | None = Field(default=None, repr=False)
    aws_session_token: str | None = Field(default=None, repr=False)
    aws_profile: str | None = None
    bedrock_api_key: str | None = Field(default=None, repr=False)  # AWS_BEARER_TOKEN_BEDROCK
    # Vertex
    vertex_region: str | None = None  # CLOUD_ML_REGION
    vertex_project: str | None = None  # ANTHROPIC_VERTEX_PROJECT_ID
    vertex_access_token: str | None = Field(default=None, repr=False)

    @property
    def label(self) -> str:
        return {"anthropic": "the Anthropic API", "bedrock": "AWS Bedrock", "vertex": "Google Vertex AI"}[self.provider]


def _installed(module: str) -> bool:
    """Whether `module` can be imported, without importing it (the SDKs load theirs lazily)."""
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def provider_problems(config: ProviderConfig) -> list[str]:
    """Everything the provider still needs, one line each, all at once (a library to install, a setting
    to set): `deepthread doctor` prints them, and model_api refuses with all of them."""
    problems = []
    if config.provider == "bedrock":
        if not _installed("botocore"):
            problems.append(
                "DEEPTHREAD_MODEL_PROVIDER=bedrock needs boto3, which is not installed: "
                "pip install 'deepthread[bedrock]'"
            )
        if not config.aws_region:
            problems.append(
                "AWS_REGION is not set: DEEPTHREAD_MODEL_PROVIDER=bedrock needs the region where the models are "
                "enabled, e.g. AWS_REGION=us-east-1"
            )
    elif config.provider == "vertex":
        if not config.vertex_access_token and not _installed("google.auth"):
            problems.append(
                "DEEPTHREAD_MODEL_PROVIDER=vertex needs google-auth, which is not installed: "
                "pip install 'deepthread[vertex]' (or set DEEPTHREAD_VERTEX_ACCESS_TOKEN)"
            )
        if not config.vertex_region:
            problems.append(
                "CLOUD_ML_REGION is not set: DEEPTHREAD_MODEL_PROVIDER=vertex needs the region Claude runs in, "
                "e.g. CLOUD_ML_REGION=us-east5 (or global)"
            )
        if not config.vertex_project:
            problems.append(
                "ANTHROPIC_VERTEX_PROJECT_ID is not set: DEEPTHREAD_MODEL_PROVIDER=vertex needs the Google Cloud "
                "project where Claude is enabled"
            )
    return problems
