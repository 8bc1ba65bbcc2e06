"""docs/research.md shows the capability table as the code holds it (agent/model_capabilities.py)."""
from __future__ import annotations

import re

import pytest

from agent.model_capabilities import MODELS
from tests.paths import ROOT

TABLE = (ROOT / "docs" / "research.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_model_of_the_table_is_documented_with_its_prices_and_window(model: str) -> None:
    caps = MODELS[model]
    row = next((line for line in TABLE.splitlines() if line.startswith(f"| `{model}` |")), None)
    assert row is not None, f"docs/research.md has no row for {model}"
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == f"{caps.context_window // 1000:,}k"
    assert re.match(rf"^\${caps.input_usd:g} / \${caps.output_usd:g}\b", cells[2]), cells[2]
    assert cells[3].startswith(caps.thinking)
    assert cells[4] == (", ".join(sorted(caps.server_tools)) or "none")
    assert cells[5] == ("yes" if caps.forced_tool_choice else "refused")
    assert cells[6] == ("yes" if caps.sampling_parameters else "refused")
