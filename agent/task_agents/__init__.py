"""Parallel task agents for spawn_tasks: briefs, child budgets, the team that runs them, the
board that shows them in the thread, and the one result they come back as.

A task agent is a ResearchLoop of its own, made by the lead's `child` (agent/loop.py): that
makes loop → task_agents → loop the engine's one import circle, by design. Task agents know
nothing of the lead's conversation, of their siblings or of the report (only the lead
writes sections), and never spawn task agents themselves."""

from __future__ import annotations

from .brief import TaskBrief
from .budget import TaskRefused
from .numbered_log import NumberedLog
from .report import TaskReport, render
from .team import RESEARCH_TOOLS, TaskTeam

__all__ = ["RESEARCH_TOOLS", "NumberedLog", "TaskBrief", "TaskRefused", "TaskReport", "TaskTeam", "render"]
