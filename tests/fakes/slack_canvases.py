"""The fake Slack's canvases: canvases.create, canvases.edit, canvases.sections.lookup, canvases.access.set,
and files.info for a canvas (a canvas is a file; its permalink is what a message links to).

From the methods' pages (docs.slack.dev/reference/methods/canvases.*; the argument lists and errors
also in the slack_kit mirror of Slack's method docs): create is Tier 2, edit, lookup and access.set
Tier 3; `canvases:write` for create, edit and access.set, `canvases:read` for lookup.

- `document_content` is `{"type": "markdown", "markdown": …}`, at most 1 MiB of markdown.
- edit applies exactly one change per call ("only one operation per API call is currently
  supported"): insert_after / insert_before (section_id and document_content), insert_at_start /
  insert_at_end (document_content), replace (document_content, with a section_id or the whole
  canvas), delete (section_id), rename (title_content).
- lookup takes `criteria` as JSON: `section_types` (1–3 of any_header, h1, h2, h3) and/or
  `contains_text`; it answers the ids of matching sections, `{"sections": [{"id": …}, …]}`.
- A workspace with canvases off answers `canvas_disabled_user_team` (`disable_canvases()`); an
  unknown or deleted canvas `canvas_not_found`.

ASSUMED where the pages are silent, and named so: a section is a heading and everything under it
up to the next heading (content before the first heading is a section of its own); `contains_text`
is matched, case-insensitively, against the whole section's text as shown (heading and body, Markdown's
backslash escapes removed); an edit naming
a section id the canvas does not have answers `canvas_editing_failed`; sections a replace writes get
new ids (only ids a lookup answered are relied on); more than one change in a call answers
`invalid_arguments`. Every change applied is kept (`Canvas.edits`) and the canvas content is kept
section by section, so tests can assert that a revised section was replaced in place.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.fakes.slack_records import SlackError, _str

if TYPE_CHECKING:
    from tests.fakes.slack import FakeSlack

__all__ = ["Canvas", "CanvasSection", "canvas_of", "canvases", "disable_canvases", "register"]

MAX_MARKDOWN_CHARS = 1_048_576
SECTION_TYPES = frozenset({"any_header", "h1", "h2", "h3"})
ACCESS_LEVELS = frozenset({"read", "write", "owner"})
OPERATIONS = frozenset({"insert_after", "insert_before", "insert_at_start", "insert_at_end", "replace", "delete",
                        "rename"})
_HEADING = re.compile(r"^(#{1,3})\s+\S")
_ids = itertools.count(1)


@dataclass
class CanvasSection:
    id: str
    kind: str  # "h1", "h2", "h3", or "text" (what comes before the first heading)
    markdown: str

    @property
    def heading(self) -> str:
        first = self.markdown.split("\n", 1)[0]
        return _shown(first.lstrip("#").strip()) if self.kind != "text" else ""


@dataclass
class Canvas:
    id: str
    title: str
    channel_id: str | None  # the channel it is tabbed in, if any
    sections: list[CanvasSection] = field(default_factory=list)
    access: dict[str, str] = field(default_factory=dict)  # channel or user id -> access level
    edits: list[dict[str, Any]] = field(default_factory=list)  # every change applied, in order
    deleted: bool = False

    def markdown(self) -> str:
        return "\n".join(s.markdown for s in self.sections)

    def headings(self) -> list[str]:
        return [s.heading for s in self.sections if s.kind != "text"]

    def section(self, heading_starts: str) -> CanvasSection | None:
        return next((s for s in self.sections if s.heading.startswith(heading_starts)), None)


def register(fake: FakeSlack) -> None:
    """Teach `fake` the canvas methods; wraps files.info so a canvas is a file too (call after slack_files)."""
    if getattr(fake, "canvases", None) is None:
        fake.canvases = {}  # type: ignore[attr-defined]
        fake.canvases_disabled = False  # type: ignore[attr-defined]
    files_info = fake._methods["files.info"]

    def info(p: dict[str, Any]) -> dict[str, Any]:
        canvas = fake.canvases.get(_str(p.get("file")))  # type: ignore[attr-defined]
        if canvas is None:
            return files_info(p)
        if canvas.deleted:
            raise SlackError("file_not_found")
        return {"file": {"id": canvas.id, "name": canvas.title, "title": canvas.title, "filetype": "quip",
                         "mimetype": "application/vnd.slack-docs", "pretty_type": "Canvas",
                         "permalink": f"https://deepthread-test.slack.com/docs/{fake.team_id}/{canvas.id}"}}

    fake._methods.update({
        "files.info": info,
        "canvases.create": lambda p: _create(fake, p),
        "canvases.edit": lambda p: _edit(fake, p),
        "canvases.sections.lookup": lambda p: _lookup(fake, p),
        "canvases.access.set": lambda p: _access_set(fake, p),
    })


def disable_canvases(fake: FakeSlack, disabled: bool = True) -> None:
    """Canvases are turned off for this workspace: every canvas method answers canvas_disabled_user_team."""
    fake.canvases_disabled = disabled  # type: ignore[attr-defined]


def canvases(fake: FakeSlack) -> list[Canvas]:
    with fake._lock:
        return [copy.deepcopy(c) for c in fake.canvases.values() if not c.deleted]  # type: ignore[attr-defined]


def canvas_of(fake: FakeSlack, canvas_id: str) -> Canvas | None:
    with fake._lock:
        found = fake.canvases.get(canvas_id)  # type: ignore[attr-defined]
        return copy.deepcopy(found) if found is not None else None


# --- rules -------------------------------------------------------------------------------


def _enabled(fake: FakeSlack) -> None:
    if fake.canvases_disabled:  # type: ignore[attr-defined]
        raise SlackError("canvas_disabled_user_team")


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise SlackError("invalid_arguments") from None
    return value


def _markdown(document: Any) -> str:
    document = _json(document)
    if not isinstance(document, dict) or document.get("type") != "markdown" or not isinstance(
            document.get("markdown"), str):
        raise SlackError("invalid_arguments")
    if len(document["markdown"]) > MAX_MARKDOWN_CHARS:
        raise SlackError("canvas_editing_failed")
    return document["markdown"]


def _sections(markdown: str) -> list[CanvasSection]:
    """Heading-scoped sections (ASSUMED, see the module docstring)."""
    found: list[CanvasSection] = []
    for line in markdown.split("\n"):
        heading = _HEADING.match(line)
        if heading:
            found.append(CanvasSection(f"temp:C:{next(_ids):08d}", f"h{len(heading.group(1))}", line))
        elif found:
            found[-1].markdown += "\n" + line
        elif line.strip():
            found.append(CanvasSection(f"temp:C:{next(_ids):08d}", "text", line))
    for section in found:
        section.markdown = section.markdown.rstrip("\n")
    return found


def _shown(markdown: str) -> str:
    """A section's text as a reader sees it: Markdown's backslash escapes removed."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def _canvas(fake: FakeSlack, p: dict[str, Any]) -> Canvas:
    canvas = fake.canvases.get(_str(p.get("canvas_id")))  # type: ignore[attr-defined]
    if canvas is None or canvas.deleted:
        raise SlackError("canvas_not_found")
    return canvas


# --- the methods -------------------------------------------------------------------------


def _create(fake: FakeSlack, p: dict[str, Any]) -> dict[str, Any]:
    _enabled(fake)
    document = p.get("document_content")
    markdown = _markdown(document) if document is not None else ""
    canvas_id = f"F{next(fake._file_counter):08d}"
    title = _str(p.get("title")) or "Untitled"
    fake.canvases[canvas_id] = Canvas(canvas_id, title, _str(p.get("channel_id")) or None,  # type: ignore[attr-defined]
                                      _sections(markdown))
    return {"canvas_id": canvas_id}


def _edit(fake: FakeSlack, p: dict[str, Any]) -> dict[str, Any]:
    _enabled(fake)
    canvas = _canvas(fake, p)
    changes = _json(p.get("changes"))
    if not isinstance(changes, list) or len(changes) != 1 or not isinstance(changes[0], dict):
        raise SlackError("invalid_arguments")
    change = changes[0]
    operation = _str(change.get("operation"))
    if operation not in OPERATIONS:
        raise SlackError("invalid_arguments")
    if operation == "rename":
        title = _json(change.get("title_content"))
        if not isinstance(title, dict) or not _str(title.get("markdown")):
            raise SlackError("invalid_arguments")
        canvas.title = title["markdown"]
        canvas.edits.append(copy.deepcopy(change))
        return {}
    section_id = _str(change.get("section_id")) or None
    needs_section = operation in ("insert_after", "insert_before", "delete")
    if needs_section and section_id is None:
        raise SlackError("invalid_arguments")
    at = None
    if section_id is not None:
        at = next((i for i, s in enumerate(canvas.sections) if s.id == section_id), None)
        if at is None:
            raise SlackError("canvas_editing_failed")
    new = [] if operation == "delete" else _sections(_markdown(change.get("document_content")))
    if operation == "insert_at_start":
        canvas.sections[:0] = new
    elif operation == "insert_at_end":
        canvas.sections += new
    elif operation == "insert_before":
        assert at is not None
        canvas.sections[at:at] = new
    elif operation == "insert_after":
        assert at is not None
        canvas.sections[at + 1:at + 1] = new
    elif operation == "replace":
        if at is None:
            canvas.sections = new
        else:
            canvas.sections[at:at + 1] = new
    else:  # delete
        assert at is not None
        del canvas.sections[at]
    canvas.edits.append(copy.deepcopy(change))
    return {}


def _lookup(fake: FakeSlack, p: dict[str, Any]) -> dict[str, Any]:
    _enabled(fake)
    canvas = _canvas(fake, p)
    criteria = _json(p.get("criteria"))
    if not isinstance(criteria, dict):
        raise SlackError("invalid_arguments")
    types = criteria.get("section_types")
    text = criteria.get("contains_text")
    if types is None and text is None:
        raise SlackError("invalid_arguments")
    if types is not None and (not isinstance(types, list) or not 1 <= len(types) <= 3
                              or not set(types) <= SECTION_TYPES):
        raise SlackError("invalid_arguments")
    kinds = None if types is None else {"h1", "h2", "h3"} if "any_header" in types else set(types)
    found = [s for s in canvas.sections
             if (kinds is None or s.kind in kinds) and (text is None or str(text).lower() in _shown(s.markdown).lower())]
    return {"sections": [{"id": s.id} for s in found]}


def _access_set(fake: FakeSlack, p: dict[str, Any]) -> dict[str, Any]:
    _enabled(fake)
    canvas = _canvas(fake, p)
    level = _str(p.get("access_level"))
    if level not in ACCESS_LEVELS:
        raise SlackError("invalid_arguments")
    channels, users = _str(p.get("channel_ids")), _str(p.get("user_ids"))
    if bool(channels) == bool(users):
        raise SlackError("invalid_parameters")
    for entity in (channels or users).split(","):
        entity = entity.strip().strip('[]"')
        if entity:
            canvas.access[entity] = level
    return {}
