"""Every import a module makes, read from its source (those inside functions too), made absolute: the
layer tests of bot/ and jobs/ read the code itself, so a move that breaks a rule fails with its line."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import ROOT


def module_name(path: Path, root: Path = ROOT) -> str:
    """`jobs/records/store.py` → "jobs.records.store"; a package's `__init__.py` → the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, module) for every import in `path`; `from pkg import name` is given as `pkg.name`
    (the name may be a submodule or an attribute: callers match on prefixes)."""
    package = list(path.relative_to(root).parts[:-1])
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found
