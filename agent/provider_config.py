"""The model provider's settings (DEEPTHREAD_MODEL_PROVIDER and what each needs), apart from the
clients model_provider.py makes from them: settings are read where the SDK is never loaded."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .model_capabilities import Provider

__all__ = ["ProviderConfig", "ProviderUnavailable"]


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
