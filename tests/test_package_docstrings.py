"""Every package opens with a docstring that says what it owns, so a reader learns a folder from its __init__."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.paths import ROOT

PACKAGES = sorted(p for top in ("agent", "jobs", "bot") for p in (ROOT / top).rglob("__init__.py"))
SHORTEST_USEFUL_DOCSTRING = 40  # characters: a sentence, not a label


@pytest.mark.parametrize("init", PACKAGES, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_a_package_says_what_it_owns(init: Path) -> None:
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert doc and len(doc) >= SHORTEST_USEFUL_DOCSTRING, f"{init.relative_to(ROOT)}: open with what the package owns"


def test_every_folder_of_code_is_a_package() -> None:
    """A folder of modules without __init__.py is a namespace package, with no docstring to read."""
    folders = {p.parent for top in ("agent", "jobs", "bot") for p in (ROOT / top).rglob("*.py")}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists())
    assert not missing, f"folders without __init__.py: {missing}"
