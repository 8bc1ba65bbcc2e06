"""Parallel task agents for spawn_tasks: briefs, child budgets, the team that runs them, and
the one result they come back as."""

from __future__ import annotations

from .brief import TaskBrief
from .budget import TaskRefused
from .numbered_log import NumberedLog
from .report import TaskReport, render
from .team import RESEARCH_TOOLS, TaskTeam

__all__ = ["RESEARCH_TOOLS", "NumberedLog", "TaskBrief", "TaskRefused", "TaskReport", "TaskTeam", "render"]
