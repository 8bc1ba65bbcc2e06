"""The model SDK's first answers are read at a shared worker's start-up (agent/sdk_warmup.py), offline:
its response models are built on first use (pydantic's deferred build), ~50 ms of CPU that the first
run on a loop shared by fifty would otherwise spend there. In a fresh interpreter, as a worker starts."""
from __future__ import annotations

import subprocess
import sys

from tests.paths import ROOT

CHECK = """
import anthropic.types as t
names = ("Message", "TextBlock", "ToolUseBlock", "Usage")
before = [getattr(t, n).__pydantic_complete__ for n in names]
from agent.sdk_warmup import warm_up
warm_up()
after = [getattr(t, n).__pydantic_complete__ for n in names]
print(before, after)
"""


def test_warm_up_builds_the_models_a_first_answer_needs_without_the_network() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NO_PROXY": "*"})
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = done.stdout.strip().split("] [")
    assert "True" not in before, "already built before the warm-up: the test shows nothing"
    assert "False" not in after, done.stdout
