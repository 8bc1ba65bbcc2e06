"""Each package says what it exports (as httpx's test of its own __all__ does): a change to a
public surface is deliberate, and every exported name exists."""
from __future__ import annotations

import importlib

import pytest

from tests.paths import ROOT

EXPORTS = {
    "agent": {
        "AgentConfig", "AssembledReport", "Budget", "Caps", "Chart", "DDGSFactory", "FetchConfig", "Figure",
        "FigureFlag", "FileInfo", "FileUnavailable", "Finished", "Footnote", "MARKER_RE", "MAX_FILE_BYTES",
        "MAX_QUESTION_CHARS", "ModelLimits", "Outcome", "PROFILES", "Progress", "RequestRecord", "ResearchTask", "RunEvent",
        "SNIPPET_NOTE", "SearchConfig", "SearchProvider", "Section", "SectionRevised", "SectionWritten", "Source",
        "SourceAdded", "SourceRegistry", "ThreadMessage", "ThreadWorkspace", "Usage", "UsageRecorded",
        "WorkspaceError", "assemble", "cost_usd", "describe_api_error", "domain_of", "figure_line", "figures_in",
        "load_png", "research", "search_providers", "search_web", "sentences", "shorten", "to_markdown", "too_large",
        "usage_by_model", "utcnow", "SearchUnavailable", "WorkspaceHit", "WorkspaceSearch", "WorkspaceSearchMode",
        "private_sources_allowed", "McpServerConfig",
        # The model's provider and capability table (issue 28).
        "MODELS", "Capabilities", "ModelAPI", "ProviderConfig", "ProviderUnavailable", "capabilities", "model_api",
        "unknown_model_notice", "search_model", "WEB_SEARCH_TYPE", "WEB_SEARCH_BASIC_TYPE", "detect_language",
    },
    "jobs": {
        "AsyncRuns", "Continuation", "JobRuntime", "Run", "RunNotFound", "RunState", "RunStatus", "RunStore", "Runs",
        "Upgrade", "configure", "enqueue", "execute", "job_timeout_for", "keys", "run_inline",
    },
}


@pytest.mark.parametrize("package", sorted(EXPORTS))
def test_the_package_exports_exactly_its_reviewed_names(package: str) -> None:
    module = importlib.import_module(package)
    assert set(module.__all__) == EXPORTS[package]
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not define: {missing}"


def test_the_bot_uses_the_engine_only_through_its_exports() -> None:
    """bot/ imports `agent`, never its modules: the engine's insides can move without touching the bot."""
    import ast

    deep = []
    for path in sorted(ROOT.joinpath("bot").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            modules += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            deep += [f"{path.name}: {m}" for m in modules if m.startswith("agent.")]
    assert not deep, f"bot/ reaches into the engine's modules: {deep}"
