"""Prompts are product code: every change to one must be deliberate (PROMPTS.md).

To accept a change, run: UPDATE_SNAPSHOTS=1 bash scripts/test tests/test_prompts.py
"""
from __future__ import annotations

import json
import os

from agent.prompts import load
from tests.paths import ROOT, SNAPSHOTS

PROMPTS = ROOT / "agent" / "prompts"
SNAPSHOT = SNAPSHOTS / "prompts.json"


def current() -> str:
    texts = {path.stem: load(path.stem) for path in sorted(PROMPTS.glob("*.md"))}
    return json.dumps(texts, indent=1, ensure_ascii=False) + "\n"


def test_prompts_match_the_reviewed_snapshot() -> None:
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(current(), encoding="utf-8")
    assert current() == SNAPSHOT.read_text(encoding="utf-8"), (
        "a prompt changed: review the diff, then accept with UPDATE_SNAPSHOTS=1")


def test_the_lead_prompt_keeps_the_rules_the_research_found() -> None:
    system = load("system")
    for rule in ("primary sources", "Never invent a marker", "revise_section", "FINAL TURN", "Checking:"):
        assert rule in system or rule.lower() in system.lower(), rule
