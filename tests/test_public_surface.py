"""Each package says what it exports (as httpx's test of its own __all__ does): a change to a
public surface is deliberate, and every exported name exists."""
from __future__ import annotations

import importlib

import pytest

EXPORTS = {
    "agent": {
        "AgentConfig", "AssembledReport", "Budget", "FetchConfig", "Finished", "Outcome", "PROFILES", "Progress",
        "ResearchTask", "RunEvent", "SearchConfig", "Section", "SectionRevised", "SectionWritten", "Source",
        "SourceAdded", "SourceRegistry", "UsageRecorded", "assemble", "research", "to_markdown",
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
