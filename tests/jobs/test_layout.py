"""jobs/ is read by concern, each a package whose `__init__` says what it owns and what it must not
import; top to bottom, a package imports only the packages below it (jobs/__init__.py lists them), and
no module of jobs/ reaches another through a circle.

Read from the code itself (every import, those inside functions too), so a module that reaches up,
or a circle closed by a lazy import, fails here with the line that does it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.import_graph import imports_of, module_name
from tests.paths import ROOT

JOBS = ROOT / "jobs"
# Top to bottom. "<ground>" is jobs/ itself: its exports (__init__) and its exception tree, which
# every package may use.
LAYERS = ["workers", "upkeep", "lifecycle", "budgets", "records", "control", "process", "keyspace", "<ground>"]
GROUND_MODULES = ["__init__.py", "exceptions.py"]
MODULES = sorted(JOBS.rglob("*.py"))


def _layer_of(module: str) -> str | None:
    """`jobs.records.store` → "records"; `jobs.exceptions`, `jobs` → "<ground>"; outside jobs → None."""
    parts = module.split(".")
    if parts[0] != "jobs":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "<ground>"


def rule_breaks(path: Path, root: Path = ROOT) -> list[str]:
    """The imports in `path` that name a higher layer than its own, or `bot`; each as `file:line …`."""
    own = _layer_of(module_name(path, root))
    assert own is not None, f"{path} is not in jobs/"
    found = []
    for line, module in imports_of(path, root):
        where = f"{path.relative_to(root)}:{line} imports {module}"
        if module.split(".")[0] == "bot":
            found.append(f"{where} (jobs must not know the bot)")
            continue
        target = _layer_of(module)
        if target is None:
            continue
        if own == "<ground>" and module_name(path, root) == "jobs":
            continue  # jobs/__init__ exports names from every layer, each imported on first use
        if LAYERS.index(target) < LAYERS.index(own):
            found.append(f"{where} ({own} must not import {target})")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_jobs_module_imports_only_its_own_package_and_those_below(path: Path) -> None:
    broken = rule_breaks(path)
    assert not broken, "\n".join(broken)


def _graph() -> dict[str, set[str]]:
    """Module → the modules of jobs/ it imports (`from .keyspace import keys` names jobs.keyspace.keys)."""
    names = {module_name(path) for path in MODULES}
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        targets = set()
        for _, module in imports_of(path):
            # the longest prefix that is a module of jobs/: `jobs.records.store.RunStore` → jobs.records.store
            parts = module.split(".")
            for end in range(len(parts), 0, -1):
                if ".".join(parts[:end]) in names:
                    targets.add(".".join(parts[:end]))
                    break
        graph[module_name(path)] = targets - {module_name(path)}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected part of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_of_jobs_reaches_another_through_a_circle() -> None:
    graph = _graph()
    # jobs/__init__ names every layer's exports, and any module may `from jobs import keys`: the
    # package itself is not a node, its submodules are.
    graph.pop("jobs", None)
    graph = {node: targets - {"jobs"} for node, targets in graph.items()}
    assert _circles(graph) == []


def test_every_package_says_what_it_owns_and_what_it_must_not_import() -> None:
    for layer in LAYERS[:-1]:
        doc = ast.get_docstring(ast.parse((JOBS / layer / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "must not" in doc.lower(), f"jobs/{layer}/__init__.py: say what it owns and what it must not import"


def test_jobs_is_its_packages_and_a_ground_of_two_modules() -> None:
    assert sorted(p.name for p in JOBS.glob("*.py")) == GROUND_MODULES
    packages = sorted(p.name for p in JOBS.iterdir() if (p / "__init__.py").exists())
    assert packages == sorted(LAYERS[:-1]), f"jobs/'s packages are the layers: {packages}"
    # a package's __init__ is its docstring only: importing one module of it loads no other
    for layer in LAYERS[:-1]:
        body = ast.parse((JOBS / layer / "__init__.py").read_text(encoding="utf-8")).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), f"jobs/{layer}/__init__.py holds code"


def test_the_rule_sees_upward_imports_and_circles_in_every_spelling(tmp_path: Path) -> None:
    """The checks must not pass on a tree they cannot read: relative, absolute and lazy imports upward
    are seen, and a circle closed inside a function is a circle."""
    records = tmp_path / "jobs" / "records"
    records.mkdir(parents=True)
    (records / "store.py").write_text(
        "from ..lifecycle import runs\n"
        "from jobs.upkeep.retention import Retention\n"
        "from ..keyspace.keys import prefix\n"  # below: allowed
        "from . import models\n"  # its own package: allowed
        "from jobs.exceptions import RunNotFound\n"  # the ground: allowed
        "def late():\n"
        "    from jobs.workers import executor\n"
        "    from bot.keys import INSTALLATIONS\n"
    )
    found = rule_breaks(records / "store.py", root=tmp_path)
    assert [f.split(" imports ")[1].split(" ")[0] for f in found] == [
        "jobs.lifecycle.runs", "jobs.upkeep.retention.Retention", "jobs.workers.executor", "bot.keys.INSTALLATIONS"
    ]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_every_job_function_rq_may_hold_resolves_by_its_stored_name() -> None:
    """RQ stores a job's function by its dotted name; the names the queue and the re-check schedule
    write now, and those written before the modules moved into packages (a re-check is queued weeks
    ahead), all reach the function, as RQ's own lookup finds it."""
    from rq.utils import import_attribute

    from jobs.lifecycle.queue import EXECUTE
    from jobs.upkeep.recheck import run_recheck
    from jobs.workers.executor import execute

    stored = {
        EXECUTE: execute,
        f"{run_recheck.__module__}.{run_recheck.__qualname__}": run_recheck,
        "jobs.executor.execute": execute,  # before the move
        "jobs.recheck.run_recheck": run_recheck,  # before the move
    }
    for name, function in stored.items():
        assert import_attribute(name) is function, name
