"""Prompts are product code: kept as files, loaded once, snapshot-tested (test_prompts.py).

Owns the words every model request is given: the lead's and the task agents' system prompts
(with the delegation rules), and those of the side requests (reading a page or a file, ranking
chunks, compaction, constraints, re-checks). Holds no logic and knows nothing of how a prompt
is sent: the module that uses one fills in its values and places it in the request."""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def load(name: str) -> str:
    return files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8")
