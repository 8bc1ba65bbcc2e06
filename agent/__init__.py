"""The research engine: the loop, context projection (elision, compaction), budgets, tools,
citations and the sectioned report. One run is `research(task, config, ...)`, which emits
RunEvents and returns an Outcome.

Knows nothing about Slack, RQ or Redis, and imports nothing from `jobs` or `bot`: what it
stores and how it is steered are protocols defined here, kept in memory here (the terminal
mode, tests), and kept in Redis by `jobs`. What the bot and jobs use is exported here
(`__all__`, held by test_public_surface.py); the bot imports nothing deeper."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports

# Imported when first used (lazy.py): what the serve process needs must not load the model SDK.
if TYPE_CHECKING:
    from .activity import ACTIVITY, BATCH_SEPARATOR, BRANCH_SEPARATOR, BRANCH_STATES
    from .activity import parse as parse_activity
    from .capacity import ModelLimits
    from .charts import Chart
    from .charts.blobs import load_png
    from .citations import SourceRegistry
    from .claims.models import FootnoteClaim
    from .claims.view import CitedClaim, ClaimCounts, cited_claims, claim_counts, claim_line
    from .config import PROFILES, AgentConfig, Budget, Caps, FetchConfig, McpServerConfig, SearchConfig, SearchProvider
    from .context.requestlog import RequestRecord
    from .defaults import MAX_QUESTION_CHARS
    from .display import domain_of, shorten
    from .earlier import EarlierReport, EarlierResearch, EarlierSource
    from .events import (
        Finished,
        Progress,
        RunEvent,
        SectionRevised,
        SectionWritten,
        Source,
        SourceAdded,
        UsageRecorded,
        utcnow,
    )
    from .figures import Figure, FigureFlag, figures_in, sentences
    from .final_turn import Outcome
    from .language import detect as detect_language
    from .markers import MARKER_RE
    from .model import describe_api_error, search_model
    from .model_capabilities import MODELS, Capabilities, capabilities, unknown_model_notice
    from .model_capabilities import WEB_SEARCH as WEB_SEARCH_TYPE
    from .model_capabilities import WEB_SEARCH_BASIC as WEB_SEARCH_BASIC_TYPE
    from .model_provider import ModelAPI, model_api
    from .pricing import cost_usd
    from .provider_config import ProviderConfig, ProviderUnavailable, Silence, provider_problems
    from .report import (
        FLAG_MARK,
        SNIPPET_NOTE,
        AssembledReport,
        Footnote,
        Section,
        anchor_lines,
        assemble,
        figure_line,
        to_markdown,
    )
    from .run import research
    from .silence import ModelWatch, Waiting, endpoint
    from .task import ResearchTask
    from .tools.search import DDGSFactory
    from .tools.search import providers as search_providers
    from .tools.search import search as search_web
    from .usage import Usage, usage_by_model
    from .visibility import WorkspaceSearchMode, private_sources_allowed
    from .workspace import (
        MAX_FILE_BYTES,
        FileInfo,
        FileUnavailable,
        ThreadMessage,
        ThreadWorkspace,
        WorkspaceError,
        too_large,
    )
    from .workspace_search import SearchUnavailable, WorkspaceHit, WorkspaceSearch

__all__ = [
    "ACTIVITY",
    "BATCH_SEPARATOR",
    "BRANCH_SEPARATOR",
    "BRANCH_STATES",
    "FLAG_MARK",
    "parse_activity",
    "MODELS",
    "WEB_SEARCH_BASIC_TYPE",
    "WEB_SEARCH_TYPE",
    "McpServerConfig",
    "private_sources_allowed",
    "WorkspaceSearchMode",
    "WorkspaceSearch",
    "WorkspaceHit",
    "SearchUnavailable",
    "ModelWatch",
    "endpoint",
    "Silence",
    "Waiting",
    "CitedClaim",
    "ClaimCounts",
    "FootnoteClaim",
    "cited_claims",
    "claim_counts",
    "claim_line",
    "EarlierReport",
    "EarlierResearch",
    "EarlierSource",
    "AgentConfig",
    "AssembledReport",
    "Budget",
    "Capabilities",
    "Caps",
    "Chart",
    "DDGSFactory",
    "FetchConfig",
    "Figure",
    "FigureFlag",
    "FileInfo",
    "FileUnavailable",
    "Finished",
    "Footnote",
    "MARKER_RE",
    "MAX_FILE_BYTES",
    "MAX_QUESTION_CHARS",
    "ModelLimits",
    "ModelAPI",
    "Outcome",
    "PROFILES",
    "Progress",
    "ProviderConfig",
    "ProviderUnavailable",
    "RequestRecord",
    "ResearchTask",
    "RunEvent",
    "SNIPPET_NOTE",
    "SearchConfig",
    "SearchProvider",
    "Section",
    "SectionRevised",
    "SectionWritten",
    "Source",
    "SourceAdded",
    "SourceRegistry",
    "ThreadMessage",
    "ThreadWorkspace",
    "Usage",
    "UsageRecorded",
    "WorkspaceError",
    "anchor_lines",
    "assemble",
    "capabilities",
    "cost_usd",
    "describe_api_error",
    "detect_language",
    "domain_of",
    "figure_line",
    "figures_in",
    "load_png",
    "model_api",
    "provider_problems",
    "research",
    "search_model",
    "search_providers",
    "search_web",
    "sentences",
    "shorten",
    "to_markdown",
    "too_large",
    "unknown_model_notice",
    "usage_by_model",
    "utcnow",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
