"""PINNED: what survives every compaction word for word (task, constraints, notes, report
outline, and a manifest of exact identifiers)."""

from __future__ import annotations

from collections.abc import Iterable

from .. import defaults


class Manifest:
    """Exact identifiers met so far, in first-seen order, newest kept when over the cap."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, items: Iterable[str]) -> None:
        for item in items:
            item = " ".join(str(item).split())
            if item and item not in self.items:
                self.items.append(item)
        del self.items[: max(0, len(self.items) - defaults.MANIFEST_MAX_ITEMS)]


def render_pinned(opening: str, notes: list[str], sections: list[str], manifest: Manifest) -> str:
    """The pinned region: the opening task verbatim, then what has been settled around it."""
    lines = [opening, "", "<pinned_state>"]
    lines.append("User notes since the task was given (they are constraints too):")
    lines += [f"- {n}" for n in notes] or ["- none"]
    lines.append("Report sections written (revise them with revise_section and these ids):")
    lines += [f"- {s}" for s in sections] or ["- none yet"]
    lines.append("Exact identifiers met so far (copy them exactly when you use them):")
    lines += [f"- {i}" for i in manifest.items] or ["- none yet"]
    lines.append("</pinned_state>")
    return "\n".join(lines)
