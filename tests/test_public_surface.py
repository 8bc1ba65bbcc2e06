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


def test_the_serve_process_does_not_load_the_engine_or_the_model_sdk() -> None:
    """`agent` and `jobs` resolve their exports on first use (agent/lazy.py): the serve process asks
    for run records and settings, and loading the executor, the engine and the SDK with them cost
    each start ~2 s of CPU and ~60 MB."""
    import subprocess
    import sys

    probe = (
        "import sys, bot.cli.main, bot.cli.processes, bot.surface.app\n"
        "heavy = sorted(m for m in ('anthropic', 'jobs.executor', 'agent.run', 'agent.loop', 'ddgs') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"the serve path loads {done.stdout.strip()}"


def test_a_lazy_export_is_the_object_its_import_names_even_beside_a_submodule_of_the_same_name() -> None:
    """`agent.capabilities` is both a submodule and the exported function: importing the submodule
    for another name (MODELS) must not leave the package's attribute pointing at the module."""
    import subprocess
    import sys

    probe = (
        "import agent\n"
        "agent.MODELS\n"
        "from agent import capabilities\n"
        "import jobs\n"
        "print(callable(capabilities), type(jobs.keys).__name__, jobs.execute.__module__)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "module", "jobs.executor"]


def test_the_queue_names_the_job_function_rq_runs() -> None:
    from jobs import execute
    from jobs.queue import EXECUTE

    assert EXECUTE == f"{execute.__module__}.{execute.__qualname__}"


def test_a_lazy_package_lists_only_plain_imports_of_its_own_modules() -> None:
    from agent.lazy import _exports

    assert _exports("if TYPE_CHECKING:\n    from .a import b as c\n    from . import d\n") == {
        "c": (".a", "b"), "d": (".d", "")}
    with pytest.raises(ValueError, match="only `from .module import name`"):
        _exports("if TYPE_CHECKING:\n    import os\n")
