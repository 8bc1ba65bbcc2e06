"""Exports resolved on first use: `from agent import Finished` loads `agent.events`, not the SDK.

The package's imports are written once, as usual, under `if TYPE_CHECKING:` (so type checkers and
readers see them); this reads them back from the package's own source and imports each submodule
when one of its names is first asked for. The serve process uses a few light names, and importing
the model SDK with them cost it ~1.5 s of CPU at every start (hundreds of starts in the suite).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["lazy_exports", "resolve"]


def _exports(source: str) -> dict[str, tuple[str, str]]:
    """Exported name → (relative submodule, its name there; "" for the submodule itself), from
    the `if TYPE_CHECKING:` imports."""
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if not (isinstance(stmt, ast.ImportFrom) and stmt.level == 1):
                    raise ValueError(f"line {stmt.lineno}: only `from .module import name` belongs here")
                for alias in stmt.names:
                    if stmt.module:
                        found[alias.asname or alias.name] = ("." + stmt.module, alias.name)
                    else:  # `from . import keys`: the submodule itself
                        found[alias.asname or alias.name] = ("." + alias.name, "")
    return found


def _shadowed(exports: dict[str, tuple[str, str]], package_dir: Path) -> list[str]:
    """Exports that a submodule of the same name would replace. Importing `package.name` (anywhere,
    for any of its names) binds the module as the package's attribute `name`, so which object
    `from package import name` gives would depend on import order."""
    submodules = {info.name for info in pkgutil.iter_modules([str(package_dir)])}
    # attr is "" for `from . import name`, the submodule itself, which is no clash
    return sorted(name for name, (_, attr) in exports.items() if attr and name in submodules)


def resolve(module: str, attr: str, package: str) -> object:
    """What `from {module} import {attr}` gives, as Python's own import does: the module's attribute,
    or its submodule of that name (`from .keyspace import keys`) imported now."""
    loaded = importlib.import_module(module, package)
    if not attr:
        return loaded
    try:
        return getattr(loaded, attr)
    except AttributeError:
        if not hasattr(loaded, "__path__"):
            raise
        return importlib.import_module(f"{loaded.__name__}.{attr}")


def lazy_exports(
    package: str, init_file: str, moved: Mapping[str, str] | None = None
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for a package whose exports are its TYPE_CHECKING imports.

    `moved` maps a former submodule's name to the module that holds it now (absolute): such a name
    is no export, but what was stored under the old dotted path (RQ keeps a job's function so,
    `jobs.upkeep.recheck.run_recheck` for a re-check weeks ahead) still finds it."""
    moved = dict(moved or {})
    exports = _exports(Path(init_file).read_text(encoding="utf-8"))
    if clashes := _shadowed(exports, Path(init_file).parent):
        raise ImportError(
            f"{package} exports {', '.join(clashes)} under the name of a submodule, which replaces the"
            " export once anything imports that submodule: rename the submodule or the export"
        )
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> object:
        if name in moved:
            return importlib.import_module(moved[name])
        try:
            module, attr = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = resolve(module, attr, package)
        namespace[name] = value  # asked once: later lookups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
