"""A report too long for one message lives in a canvas shared in the thread, edited by section.

The canvas belongs to the pinned report message (like the spilled file), so a continuation that
edits the same report edits the same canvas. Its record, `deepthread:canvas:{channel}:{report_ts}`
(this module is its only writer, under the run's sync lease), holds the canvas id, its link, and
each section as placed: the report section it shows (or the summary, or the sources), its heading,
the digest of its Markdown and its canvas section id. A sync compares the rendering
(canvas_render.py) with the record and makes one canvases.edit per difference, in reading order:

- a new report section (write_section) is inserted before the first placed section that follows
  it (the sources, usually), or at the end; sections written in a burst go in with one insert;
- a changed one (revise_section, a new footnote) replaces exactly its own section;
- one the report no longer has is deleted.

Section ids come from canvases.sections.lookup by the heading's text, when an edit first needs one
(the section is replaced, deleted, or a new one goes before it), not after every write: a burst of
thirty sections then costs one insert and no lookups, where looking each up at once cost thirty
(and, at the lookups' Tier 3, most of a minute of a busy workspace's slots). Each heading is unique
(it is numbered), but a lookup matches any section whose text holds it (the sources quote passages);
whatever else it matches is a section already placed, so the ids of those not known yet are found
first, by their own headings, and the one id left is the section's. An id that cannot be told (or a
section Slack no longer has: `canvas_editing_failed`) sends the whole document once (a replace
without section_id), and the ids are looked up again. The record is saved after every edit, so a
crash or a rate-limit wait resumes where it stopped.

The canvas is created with canvases.create (a standalone canvas, tabbed in the channel only where
the workspace's plan requires it), opened to the channel for reading (canvases.access.set), and
its link read from files.info. A workspace where canvases are off (`canvas_disabled_user_team`) or
whose token lacks the scope is remembered (refusals.py, logged once) and its long reports spill
into a file as before, with a notice saying why. Every call goes through the shared limiter
(create Tier 2; edit, access.set and the lookups Tier 3), a final state's urgently.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, Field
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot import keys
from bot.slack.client import take_slots
from jobs import RunState
from jobs.keyspace.connection import text

from .canvas_render import CanvasDocument, CanvasPart
from .refusals import CANVASES, AsyncRefusals

__all__ = ["CANVAS_REFUSALS", "CanvasLink", "CanvasOutcome", "CanvasRecord", "CanvasSync"]

log = logging.getLogger("bot.publisher.canvases")

T = TypeVar("T")

# Kept as long as run state is.
RECORD_TTL_SECONDS = 90 * 24 * 3600
# Answers meaning this workspace (or token) cannot have our canvases: fall back to the file.
CANVAS_REFUSALS = frozenset(
    {
        "canvas_disabled_user_team",
        "missing_scope",
        "not_allowed_token_type",
        "restricted_action",
        "team_tier_cannot_create_channel_canvases",
        "free_teams_cannot_edit_standalone_canvases",
        "unknown_method",
        "not_allowed",
        "feature_not_enabled",
        "no_permission",
    }
)
# The plan allows only canvases tabbed in a channel: create it there instead.
TABBED_ONLY = "free_teams_cannot_create_non_tabbed_canvases"
# The canvas is gone (deleted by someone): make a new one.
GONE = frozenset({"canvas_not_found", "canvas_deleted", "file_not_found", "file_deleted"})
# A section id the canvas does not have (any more): send the whole document and look them up again.
STALE_SECTION = "canvas_editing_failed"


class Placed(BaseModel):
    key: str
    heading: str
    digest: str
    section_id: str = ""  # "" while it is not known


class CanvasRecord(BaseModel):
    canvas_id: str = ""
    permalink: str = ""
    title: str = ""
    shared: bool = False  # opened to the channel for reading
    placed: list[Placed] = Field(default_factory=list)  # in the canvas's order


@dataclass(frozen=True)
class CanvasLink:
    permalink: str
    title: str


@dataclass(frozen=True)
class CanvasOutcome:
    ok: bool = True  # False: a retry later is worthwhile
    link: CanvasLink | None = None  # where the canvas is, once it exists
    refused: str | None = None  # why this workspace has no canvases (the report spills instead)


class _Refused(Exception):
    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class CanvasSync:
    def __init__(self, redis: AsyncRedis, client: AsyncWebClient) -> None:
        self.redis = redis
        self.client = client
        self.refusals = AsyncRefusals(redis)

    # --- the record --------------------------------------------------------------------

    async def record(self, team: str | None, channel: str, report_ts: str) -> CanvasRecord | None:
        raw = await self.redis.get(keys.canvas(team, channel, report_ts))
        return CanvasRecord.model_validate_json(text(raw)) if raw else None

    async def _save(self, team: str | None, channel: str, report_ts: str, record: CanvasRecord) -> None:
        await self.redis.set(keys.canvas(team, channel, report_ts), record.model_dump_json(), ex=RECORD_TTL_SECONDS)

    async def refused(self, team: str | None) -> str | None:
        return await self.refusals.refused(CANVASES, team)

    async def link(self, state: RunState) -> CanvasLink | None:
        """The report's canvas, when it has one (a report that has one keeps it, even if it fits again)."""
        run = state.run
        if not run.channel or not run.report_message:
            return None
        record = await self.record(run.team, run.channel, run.report_message)
        if record is None or not record.canvas_id:
            return None
        return CanvasLink(permalink=record.permalink, title=record.title)

    # --- one sync ------------------------------------------------------------------------

    async def sync(self, state: RunState, document: CanvasDocument) -> CanvasOutcome:
        """Make the report's canvas show `document`, creating it first if need be."""
        run = state.run
        if not run.channel or not run.report_message:
            return CanvasOutcome()
        refused = await self.refused(run.team)
        if refused is not None:
            return CanvasOutcome(refused=refused)
        channel, report_ts = run.channel, run.report_message
        record = await self.record(run.team, channel, report_ts) or CanvasRecord()
        try:
            if not record.canvas_id:
                record = await self._create(state, document)
                await self._save(state.run.team, channel, report_ts, record)
            if not record.shared:
                record = await self._share(state, record)
                await self._save(state.run.team, channel, report_ts, record)
            if not record.permalink:
                record = await self._find_link(state, record)
                await self._save(state.run.team, channel, report_ts, record)
            await self._edit(state, record, document)
        except _Refused as refusal:
            await self.refusals.refuse(CANVASES, run.team, refusal.error)
            return CanvasOutcome(refused=refusal.error)
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error in GONE:
                log.warning("run %s: the report's canvas is gone (%s); a new one will be made", run.id, error)
                await self.redis.delete(keys.canvas(run.team, channel, report_ts))
            else:
                log.warning("run %s: updating the report's canvas failed (%s); will retry", run.id, error)
            return CanvasOutcome(ok=False, link=_link_of(record))
        except (TimeoutError, SlackClientError, OSError) as exc:
            log.warning("run %s: updating the report's canvas failed (%s); will retry", run.id, exc)
            return CanvasOutcome(ok=False, link=_link_of(record))
        return CanvasOutcome(link=_link_of(record))

    async def _call(self, state: RunState, method: str, fn: Callable[[], Awaitable[T]]) -> T:
        """One write through the limiter; a refusal of canvases themselves raises _Refused."""
        try:
            return await take_slots(self.client, state.run.team, method, fn, urgent=state.status.finished)
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error in CANVAS_REFUSALS:
                raise _Refused(error) from None
            raise

    async def _create(self, state: RunState, document: CanvasDocument) -> CanvasRecord:
        """A canvas holding only its title; the sections go in one by one, so each id is known."""
        channel = state.run.channel or ""

        async def create(tabbed: bool) -> Any:
            return await self.client.canvases_create(title=document.title, channel_id=channel if tabbed else None)

        try:
            answer = await self._call(state, "canvases.create", lambda: create(False))
        except SlackApiError as exc:
            if exc.response.get("error") != TABBED_ONLY:
                raise
            answer = await self._call(state, "canvases.create", lambda: create(True))
        canvas_id = str(answer["canvas_id"])
        log.info("run %s: the report moves to canvas %s (too long for one message)", state.run.id, canvas_id)
        return CanvasRecord(canvas_id=canvas_id, title=document.title)

    async def _share(self, state: RunState, record: CanvasRecord) -> CanvasRecord:
        """Open the canvas to the thread's channel for reading (its link in the report is for everyone there)."""
        channel = state.run.channel or ""
        try:
            await self._call(
                state,
                "canvases.access.set",
                lambda: self.client.canvases_access_set(
                    canvas_id=record.canvas_id, access_level="read", channel_ids=[channel]
                ),
            )
        except SlackApiError as exc:
            if exc.response.get("error") in GONE:
                raise
            # The canvas still works for whoever may open it; say why others may not, once.
            log.warning(
                "run %s: could not open canvas %s to %s (%s)",
                state.run.id,
                record.canvas_id,
                channel,
                exc.response.get("error"),
            )
        return record.model_copy(update={"shared": True})

    async def _find_link(self, state: RunState, record: CanvasRecord) -> CanvasRecord:
        answer = await self.client.files_info(file=record.canvas_id)  # a read: not counted by the limiter
        permalink = str((answer.get("file") or {}).get("permalink") or "")
        return record.model_copy(update={"permalink": permalink})

    # --- the edits -----------------------------------------------------------------------

    async def _edit(self, state: RunState, record: CanvasRecord, document: CanvasDocument) -> None:
        run = state.run
        channel, report_ts = run.channel or "", run.report_message or ""
        wanted = {part.key: part for part in document.parts}
        placed = list(record.placed)

        async def save() -> None:
            nonlocal record
            record = record.model_copy(update={"placed": list(placed)})
            await self._save(state.run.team, channel, report_ts, record)

        try:
            for gone in [p for p in placed if p.key not in wanted]:
                await self._change(
                    state, record, {"operation": "delete", "section_id": await self._id_of(state, record, placed, gone)}
                )
                placed.remove(gone)
                await save()
            index = 0
            while index < len(document.parts):
                part = document.parts[index]
                at = next((i for i, p in enumerate(placed) if p.key == part.key), None)
                if at is not None:
                    index += 1
                    if placed[at].digest == part.digest():
                        continue
                    # Changed: replace exactly this section.
                    section_id = await self._id_of(state, record, placed, placed[at])
                    await self._change(state, record, _content("replace", [part], section_id))
                    placed[at] = Placed(key=part.key, heading=part.heading, digest=part.digest())  # a new id
                    await save()
                    continue
                # New, with the new ones right after it (a burst of sections): one insert for all,
                # before the first placed section that follows them, else at the end.
                batch = [part]
                while index + len(batch) < len(document.parts) and not any(
                    p.key == document.parts[index + len(batch)].key for p in placed
                ):
                    batch.append(document.parts[index + len(batch)])
                index += len(batch)
                later = {p.key for p in document.parts[index:]}
                before = next((i for i, p in enumerate(placed) if p.key in later), None)
                if before is None:
                    await self._change(state, record, _content("insert_at_end", batch))
                    before = len(placed)
                else:
                    section_id = await self._id_of(state, record, placed, placed[before])
                    await self._change(state, record, _content("insert_before", batch, section_id))
                new = [Placed(key=p.key, heading=p.heading, digest=p.digest()) for p in batch]
                placed[before:before] = new
                await save()
        except _StaleSection:
            await self._rewrite(state, record, document)

    async def _change(self, state: RunState, record: CanvasRecord, change: dict[str, object]) -> None:
        try:
            await self._call(
                state,
                "canvases.edit",
                lambda: self.client.canvases_edit(canvas_id=record.canvas_id, changes=[change]),
            )
        except SlackApiError as exc:
            if exc.response.get("error") == STALE_SECTION and change.get("section_id"):
                raise _StaleSection() from None
            raise

    async def _id_of(self, state: RunState, record: CanvasRecord, placed: list[Placed], section: Placed) -> str:
        """A placed section's id, looked up (and kept) if it is not known; unknown for good: _StaleSection."""
        if not section.section_id:
            section.section_id = await self._lookup(state, record, placed, section)
        if not section.section_id:
            raise _StaleSection()
        return section.section_id

    async def _lookup(self, state: RunState, record: CanvasRecord, placed: list[Placed], section: Placed) -> str:
        """The id of the section with this heading; "" when it cannot be told. When the lookup also
        matches sections whose ids are not known yet (their text holds this heading), those are found
        first, each by its own heading, longest first, and the lookup is asked again."""
        found = await self._lookup_once(record, placed, section)
        unknown = [p for p in placed if p is not section and p.key != section.key and not p.section_id]
        if found is not None or not unknown:
            return found or ""
        for other in sorted(unknown, key=lambda p: len(p.heading), reverse=True):
            other.section_id = await self._lookup_once(record, placed, other) or ""
        return await self._lookup_once(record, placed, section) or ""

    async def _lookup_once(self, record: CanvasRecord, placed: list[Placed], section: Placed) -> str | None:
        """The one id a lookup by this heading finds that no other placed section has; "" for none,
        None for more than one."""
        answer = await self.client.canvases_sections_lookup(  # a read, counted at its tier by the client
            canvas_id=record.canvas_id, criteria={"section_types": ["h2"], "contains_text": section.heading}
        )
        known = {p.section_id for p in placed if p is not section and p.key != section.key and p.section_id}
        candidates = [str(s.get("id")) for s in answer.get("sections") or [] if str(s.get("id")) not in known]
        if len(candidates) > 1:
            return None
        return candidates[0] if candidates else ""

    async def _find(self, state: RunState, record: CanvasRecord, placed: list[Placed], written: list[Placed]) -> None:
        """The ids of sections just written, longest heading first: a heading another contains is
        looked up once that one is known (and so left out)."""
        for section in sorted(written, key=lambda p: len(p.heading), reverse=True):
            if not section.section_id:  # found already while telling another's id apart
                section.section_id = await self._lookup(state, record, placed, section)

    async def _rewrite(self, state: RunState, record: CanvasRecord, document: CanvasDocument) -> None:
        """The whole document at once (ids were lost), then every id looked up again, longest heading first:
        a heading another contains is looked up after that one is known."""
        run = state.run
        log.warning("run %s: canvas %s sections out of step; writing it whole", run.id, record.canvas_id)
        await self._change(state, record, {"operation": "replace", "document_content": _markdown(document.markdown())})
        placed = [Placed(key=p.key, heading=p.heading, digest=p.digest()) for p in document.parts]
        await self._find(state, record, placed, placed)
        await self._save(
            run.team, run.channel or "", run.report_message or "", record.model_copy(update={"placed": placed})
        )


class _StaleSection(Exception):
    """A section id is unknown or no longer in the canvas."""


def _markdown(markdown: str) -> dict[str, str]:
    return {"type": "markdown", "markdown": markdown}


def _content(operation: str, parts: list[CanvasPart], section_id: str | None = None) -> dict[str, object]:
    markdown = "\n\n".join(part.markdown for part in parts)
    change: dict[str, object] = {"operation": operation, "document_content": _markdown(markdown)}
    if section_id:
        change["section_id"] = section_id
    return change


def _link_of(record: CanvasRecord) -> CanvasLink | None:
    return CanvasLink(permalink=record.permalink, title=record.title) if record.canvas_id else None
