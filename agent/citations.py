"""The run's source registry: every citable passage gets a stable `[sN]` marker."""

from __future__ import annotations

from collections.abc import Iterable

from .events import Source
from .exceptions import UnknownCitation
from .markers import MARKER_RE

__all__ = ["MARKER_RE", "SourceRegistry", "UnknownCitation", "strip_unknown_markers"]


class SourceRegistry:
    """Issues markers in order; the same (url, passage) pair keeps its first marker."""

    def __init__(self, sources: Iterable[Source] = ()) -> None:
        self._by_marker: dict[str, Source] = {}
        self._by_key: dict[tuple[str, str], str] = {}
        for source in sources:
            self._remember(source)

    def _remember(self, source: Source) -> None:
        self._by_marker[source.marker] = source
        self._by_key.setdefault((source.url, source.passage), source.marker)

    def __len__(self) -> int:
        return len(self._by_marker)

    def get(self, marker: str) -> Source | None:
        return self._by_marker.get(marker)

    def all(self) -> list[Source]:
        return list(self._by_marker.values())

    def add(
        self,
        url: str,
        title: str,
        passage: str,
        kind: str = "excerpt",
        *,
        context: str = "",
        page_sha256: str = "",
        origin: str = "",
        private: bool = False,
    ) -> tuple[Source, bool]:
        """Register a passage; returns (source, is_new)."""
        existing = self._by_key.get((url, passage))
        if existing is not None:
            return self._by_marker[existing], False
        source = Source(
            marker=f"s{len(self._by_marker) + 1}",
            url=url,
            title=title,
            passage=passage,
            kind=kind,  # type: ignore[arg-type]
            context=context,
            page_sha256=page_sha256,
            origin=origin,
            private=private,
        )
        self._remember(source)
        return source, True

    def check(self, text: str) -> list[str]:
        """Markers cited in `text`, in order of first use; raises UnknownCitation."""
        cited: list[str] = []
        unknown: list[str] = []
        for match in MARKER_RE.finditer(text):
            marker = f"s{match.group(1)}"
            if marker in self._by_marker:
                if marker not in cited:
                    cited.append(marker)
            elif marker not in unknown:
                unknown.append(marker)
        if unknown:
            raise UnknownCitation(unknown, len(self._by_marker))
        return cited


def strip_unknown_markers(text: str, known: set[str]) -> str:
    """Drop markers the registry does not know (last resort for a final answer)."""
    return MARKER_RE.sub(lambda m: m.group(0) if f"s{m.group(1)}" in known else "", text)
