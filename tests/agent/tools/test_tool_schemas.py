"""Tool names, schemas and descriptions are prompt: every change to them must be deliberate.

To accept a change, run: UPDATE_SNAPSHOTS=1 bash scripts/test tests/test_tool_schemas.py
"""
from __future__ import annotations

import json
import os

from agent.tools import default_tools, thread_tools, workspace_tools
from tests.paths import SNAPSHOTS

SNAPSHOT = SNAPSHOTS / "tool_schemas.json"
CONTRACT_NAMES = {"web_search", "read_page", "fetch_result", "write_section", "revise_section"}


def current() -> str:
    return json.dumps([tool.schema() for tool in default_tools() + thread_tools() + workspace_tools()], indent=2, ensure_ascii=False) + "\n"


def test_tool_schemas_match_the_reviewed_snapshot() -> None:
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(current(), encoding="utf-8")
    assert current() == SNAPSHOT.read_text(encoding="utf-8"), (
        "tool schemas changed: review the diff, then accept with UPDATE_SNAPSHOTS=1")


def test_tool_names_keep_the_design_contract() -> None:
    assert {tool.name for tool in default_tools()} >= CONTRACT_NAMES


def test_every_description_says_what_the_tool_is_not_for() -> None:
    for tool in default_tools() + thread_tools() + workspace_tools():
        assert "Not for" in tool.description or "not for" in tool.description, tool.name
