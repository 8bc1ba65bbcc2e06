"""The research tools. Names are a contract (DESIGN.md); descriptions are prompt.

Owns each tool (name, description, typed input, run) and ToolContext, everything a tool may
touch during one run. A tool's failure is a ToolResult that says what to do instead.
Knows nothing of the loop's order of turns, the context projection (elision, compaction) or
Slack: the thread is reached through ThreadWorkspace, results are stored by the tool runner,
and spawn_tasks hands its briefs to the run's TaskTeam (agent/task_agents)."""

from __future__ import annotations

from .base import Tool, ToolContext, ToolResult
from .calculator import Calculator
from .chart import ChartTool
from .fetch_result import FetchResult
from .open_section import OpenSection
from .open_source import OpenSource
from .read_page import ReadPage
from .report_tools import ReviseSection, WriteSection
from .spawn_tasks import SpawnTasks
from .web_search import WebSearch

__all__ = ["Tool", "ToolContext", "ToolResult", "default_tools", "thread_tools", "workspace_tools"]


def default_tools() -> list[Tool]:
    # Fresh instances per run: tools may keep per-run memory (repeated queries, task numbers).
    return [
        WebSearch(),
        ReadPage(),
        Calculator(),
        FetchResult(),
        SpawnTasks(),
        WriteSection(),
        ReviseSection(),
        OpenSection(),
        OpenSource(),
        ChartTool(),
    ]


def thread_tools() -> list[Tool]:
    """The thread tools, for a run that has a workspace (ToolContext.workspace): add them to default_tools().
    read_file and find_in_files share one FileLibrary, so each file is downloaded and converted once."""
    from .file_library import FileLibrary
    from .find_in_files import FindInFiles
    from .read_file import ReadFile
    from .read_thread import ReadThread

    library = FileLibrary()
    return [ReadFile(library), FindInFiles(library), ReadThread()]


def workspace_tools() -> list[Tool]:
    """search_workspace, for a run given the team's Slack (ToolContext.workspace_search)."""
    from .search_workspace import SearchWorkspace

    return [SearchWorkspace()]
