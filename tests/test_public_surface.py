"""Each package says what it exports (as httpx's test of its own __all__ does): a change to a
public surface is deliberate, and every exported name exists."""
from __future__ import annotations

import importlib
import os
from pathlib import Path

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
        "EarlierReport", "EarlierResearch", "EarlierSource",
        "private_sources_allowed", "McpServerConfig",
        # The model's provider and capability table (issue 28).
        "MODELS", "Capabilities", "ModelAPI", "ProviderConfig", "ProviderUnavailable", "capabilities", "model_api",
        "unknown_model_notice", "search_model", "WEB_SEARCH_TYPE", "WEB_SEARCH_BASIC_TYPE", "detect_language",
        # A silent model service given up on in seconds; what a run waits on, for the terminal (issue 49).
        "ModelWatch", "Silence", "Waiting", "endpoint", "provider_problems",
        # The claim check (issue 46): each cited claim with its anchor and verdict, and the counts readers see.
        "CitedClaim", "ClaimCounts", "FootnoteClaim", "anchor_lines", "cited_claims", "claim_counts", "claim_line",
        # The engine's activity lines as templates, so the bot says them in the team's language (issue 47).
        "ACTIVITY", "BATCH_SEPARATOR", "BRANCH_SEPARATOR", "BRANCH_STATES", "parse_activity", "FLAG_MARK",
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
        "heavy = sorted(m for m in ('anthropic', 'jobs.workers.executor', 'agent.run', 'agent.loop', 'ddgs') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"the serve path loads {done.stdout.strip()}"


@pytest.mark.parametrize("first", ["submodules", "exports", "namesakes"])
@pytest.mark.parametrize("package", ["agent", "jobs"])
def test_every_lazy_export_is_the_object_its_import_names_whatever_was_imported_first(
        package: str, first: str) -> None:
    """Generated over each lazy package's exports, in three orders: every submodule imported (as
    another module's `from package.sub import x` does, which binds `package.sub`) before or after
    every export was asked for, or only the submodules named like an export, `from package import name` still gives what the TYPE_CHECKING
    import names. `from agent import capabilities` once gave the submodule, not the function."""
    import subprocess
    import sys

    probe = (
        "import importlib, pkgutil, pathlib, sys\n"
        "from agent.lazy import _exports, resolve\n"
        f"package = importlib.import_module({package!r})\n"
        "init = pathlib.Path(package.__file__)\n"
        "exports = _exports(init.read_text())\n"
        f"if {first == 'exports'}:\n"
        "    for name in exports:\n"
        "        getattr(package, name)\n"
        "submodules = {info.name for info in pkgutil.iter_modules([str(init.parent)])}\n"
        "for sub in sorted(submodules):\n"
        f"    if {first != 'namesakes'} or sub in exports:\n"
        "        importlib.import_module(package.__name__ + '.' + sub)\n"
        "# namesakes first: asking any other export of theirs could hide what a namesake did\n"
        "for name in sorted(exports, key=lambda name: name not in submodules):\n"
        "    module, attr = exports[name]\n"
        "    expected = resolve(module, attr, package.__name__)\n"
        "    exec(f'from {package.__name__} import {name} as got', globals())\n"
        "    if got is not expected:\n"
        "        print(name)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], f"{package} exports replaced by a submodule: {done.stdout.split()}"


def test_a_lazy_package_that_exports_a_name_under_a_submodule_of_that_name_is_refused(tmp_path: Path) -> None:
    """The class of the shadowing above is refused when the package is imported, not met later."""
    import subprocess
    import sys

    pkg = tmp_path / "clash"
    pkg.mkdir()
    (pkg / "tool.py").write_text("def tool() -> int:\n    return 1\n")
    (pkg / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from agent.lazy import lazy_exports\n"
        "if TYPE_CHECKING:\n"
        "    from .tool import tool\n"
        "__getattr__, __dir__ = lazy_exports(__name__, __file__)\n")
    env_path = f"{tmp_path}{os.pathsep}{ROOT}"
    done = subprocess.run([sys.executable, "-c", "import clash"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": env_path})
    assert done.returncode != 0
    assert "clash exports tool under the name of a submodule" in done.stderr
    assert "rename the submodule or the export" in done.stderr


def test_the_queue_names_the_job_function_rq_runs() -> None:
    from jobs import execute
    from jobs.lifecycle.queue import EXECUTE

    assert EXECUTE == f"{execute.__module__}.{execute.__qualname__}"


def test_a_lazy_package_lists_only_plain_imports_of_its_own_modules() -> None:
    from agent.lazy import _exports

    assert _exports("if TYPE_CHECKING:\n    from .a import b as c\n    from . import d\n") == {
        "c": (".a", "b"), "d": (".d", "")}
    with pytest.raises(ValueError, match="only `from .module import name`"):
        _exports("if TYPE_CHECKING:\n    import os\n")
