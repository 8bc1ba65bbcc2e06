"""The bot's packages are layers: each imports only the layers below it (bot/__init__.py draws them).

Read from the code itself (every import, those inside functions too), so a module that reaches up a
layer, or sideways into a layer it must not know, fails here with the line that does it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.import_graph import imports_of
from tests.paths import ROOT

BOT = ROOT / "bot"
# Top to bottom. The top-level modules (settings, services, keys, exceptions, limits) are the ground.
LAYERS = ["cli", "surface", "desk", "publishing", "slack", "<ground>"]
TOP_LEVEL_MODULES_AT_MOST = 12


def _layer_of(module: str) -> str | None:
    """`bot.publishing.render` → "publishing"; `bot.settings` → "<ground>"; outside bot → None."""
    parts = module.split(".")
    if parts[0] != "bot":
        return None
    if len(parts) == 1:
        return "<ground>"
    return parts[1] if parts[1] in LAYERS else "<ground>"


MODULES = sorted(BOT.rglob("*.py"))


def upward_imports(path: Path, root: Path = ROOT) -> list[str]:
    """The imports in `path` that name a higher layer than its own, each as `file:line imports module`."""
    own = _layer_of(".".join(path.relative_to(root).with_suffix("").parts))
    assert own is not None, f"{path} is not in bot/"
    upward = []
    for line, module in imports_of(path, root):
        target = _layer_of(module)
        if target is not None and LAYERS.index(target) < LAYERS.index(own):
            upward.append(f"{path.relative_to(root)}:{line} imports {module} ({own} must not know {target})")
    return upward


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_bot_module_imports_only_its_own_layer_and_those_below(path: Path) -> None:
    upward = upward_imports(path)
    assert not upward, "\n".join(upward)


def test_every_layer_says_what_it_owns_and_what_it_must_not_know() -> None:
    for layer in LAYERS[:-1]:
        doc = ast.get_docstring(ast.parse((BOT / layer / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "must not" in doc.lower(), f"bot/{layer}/__init__.py: say what it owns and what it must not know"


def test_the_top_level_of_bot_stays_small() -> None:
    modules = sorted(p.name for p in BOT.glob("*.py"))
    assert len(modules) <= TOP_LEVEL_MODULES_AT_MOST, f"bot/ has {len(modules)} top-level modules: {modules}"
    packages = sorted(p.name for p in BOT.iterdir() if (p / "__init__.py").exists())
    assert packages == sorted(LAYERS[:-1]), f"bot/'s packages are the layers: {packages}"


def test_the_rule_sees_upward_imports_in_every_spelling(tmp_path: Path) -> None:
    """The check must not pass on a tree it cannot read: relative, absolute and lazy imports upward are seen."""
    publishing = tmp_path / "bot" / "publishing"
    publishing.mkdir(parents=True)
    (publishing / "render.py").write_text(
        "from ..surface import steering\n"
        "from bot.desk.usage import usage_message\n"
        "from bot.slack.mrkdwn import escape\n"  # below: allowed
        "from . import spill\n"  # its own layer: allowed
        "def late():\n"
        "    from bot.cli import main\n"
    )
    found = upward_imports(publishing / "render.py", root=tmp_path)
    assert [f.split(" imports ")[1].split(" ")[0] for f in found] == [
        "bot.surface.steering", "bot.desk.usage.usage_message", "bot.cli.main"
    ]
