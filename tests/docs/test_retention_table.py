"""docs/security.md's table of what is kept names every key family of the key catalogues
(jobs/keys.py, bot/keys.py) once, with the owner its retention rule gives it (jobs/upkeep/retention.py,
bot/desk/retention.py): a family added to a catalogue, or a rule changed, without the table fails."""
from __future__ import annotations

import re

from bot.desk.retention import BOT_CATALOGUE
from jobs.upkeep.retention import JOBS_CATALOGUE, Owner
from tests.paths import ROOT

SECTION = "## What is kept, for how long, and how it is forgotten"
HEADER = "| keys | what | owner | how long | who can read it | how it is deleted |"


def _rows() -> dict[str, str]:
    """Key family -> the owner its row gives it (a family named twice fails here)."""
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    start = lines.index(HEADER) + 2
    found: dict[str, str] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 6 and all(cells), f"a row says what, whose, how long, who reads and how it goes: {line}"
        for family in re.findall(r"`([^`]+)`", cells[0]):
            assert family not in found, f"{family} has two rows"
            found[family] = cells[2]
    return found


def test_the_table_names_every_key_family_with_the_owner_its_rule_gives() -> None:
    rules = {name: rule.owner for catalogue in (JOBS_CATALOGUE, BOT_CATALOGUE) for name, rule in catalogue.rules.items()}
    families = set(JOBS_CATALOGUE.families()) | set(BOT_CATALOGUE.families())
    table = _rows()
    assert sorted(families - set(table)) == [], "key families missing from docs/security.md's table"
    assert sorted(set(table) - families) == [], "rows naming no key family of the catalogues"
    wrong = {name: (table[name], rules[name].value) for name in families if table[name] != rules[name].value}
    assert not wrong, f"rows whose owner is not the rule's (table, rule): {wrong}"
    assert set(table.values()) <= {o.value for o in Owner}
