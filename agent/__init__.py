"""The research engine. Knows nothing about Slack or RQ."""

from __future__ import annotations

from .citations import SourceRegistry
from .config import PROFILES, AgentConfig, Budget, FetchConfig, SearchConfig
from .events import Finished, Progress, RunEvent, SectionRevised, SectionWritten, Source, SourceAdded, UsageRecorded
from .loop import Outcome, research
from .report import AssembledReport, Section, assemble, to_markdown
from .task import ResearchTask

__all__ = [
    "AgentConfig",
    "AssembledReport",
    "Budget",
    "FetchConfig",
    "Finished",
    "Outcome",
    "PROFILES",
    "Progress",
    "ResearchTask",
    "RunEvent",
    "SearchConfig",
    "Section",
    "SectionRevised",
    "SectionWritten",
    "Source",
    "SourceAdded",
    "SourceRegistry",
    "UsageRecorded",
    "assemble",
    "research",
    "to_markdown",
]
