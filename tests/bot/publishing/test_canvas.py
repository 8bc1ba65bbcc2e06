"""A report longer than a message lives in a canvas shared in the thread, still edited by section:
each write_section inserts one canvas section, each revise_section replaces exactly its own, the
sources follow at the end; the pinned message keeps the summary, the state line and the link. A
workspace without canvases gets the file, decided once. Real slack_sdk client, the fake Slack over
HTTP keeping each canvas section by section, real Redis."""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis import Redis
from slack_sdk.web.async_client import AsyncWebClient

from agent import Finished, SectionRevised, SectionWritten, Source, SourceAdded
from bot import keys
from bot.publishing import report_render
from bot.publishing.publisher import Publisher
from jobs import RunState, RunStore
from tests.fakes import slack_canvases
from tests.fakes.scopes import manifest_bot_scopes
from tests.fakes.slack import TEAM_ID, FakeSlack
from tests.helpers import CHANNEL, posted_run

LONG = " ".join(f"Claim {word} of this finding holds [s{{n}}]." for word in "abcdefghijklmnopqrstuvwxyz") * 3


@pytest.fixture
async def client(fake_slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    yield AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")


def source(n: int) -> Source:
    return Source(marker=f"s{n}", url=f"https://example.org/{n}", title=f"Page {n}", passage=f"Finding {n} holds.")


def long_report(store: RunStore, state: RunState, sections: int = 8) -> RunState:
    """Sections of ~2,500 characters each: eight outgrow one message (about 11,500 characters)."""
    for n in range(1, sections + 1):
        state = store.apply(state, SourceAdded(source=source(n)))
        state = store.apply(state, SectionWritten(section_id=f"sec{n}", title=f"Finding {n}", body=LONG.format(n=n)))
    return state


def text_of(fake_slack: FakeSlack, ts: str) -> str:
    message = fake_slack.message(CHANNEL, ts)
    assert message is not None
    parts = []
    for block in message.blocks or []:
        if block.get("type") == "section":
            parts.append(block["text"]["text"])
        elif block.get("type") == "context":
            parts += [e.get("text", "") for e in block["elements"]]
    return "\n".join(parts)


def the_canvas(fake_slack: FakeSlack) -> slack_canvases.Canvas:
    [canvas] = slack_canvases.canvases(fake_slack)
    return canvas


async def test_a_report_that_outgrows_its_message_moves_into_a_canvas_shared_in_the_thread(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID, question="What do the findings say?")
    publisher = Publisher(redis, async_redis, store, client)
    state = long_report(store, state)
    assert await publisher.sync(state)
    canvas = the_canvas(fake_slack)
    assert canvas.title == "Report: What do the findings say?"
    assert canvas.headings() == [f"{n}. Finding {n}" for n in range(1, 9)] + ["Sources"]
    assert canvas.access == {CHANNEL: "read"}, "opened to the thread's channel"
    assert "[[1]](https://example.org/1)" in canvas.sections[0].markdown, "footnotes link to their sources"
    pinned = text_of(fake_slack, state.run.report_message or "")
    assert f"/docs/{TEAM_ID}/{canvas.id}|" in pinned, "the pinned message links to the canvas"
    assert "Queued" in pinned and "*Sections*" in pinned
    assert not fake_slack.files(), "no file: the canvas holds the full report"

    state = store.apply(state, Finished(status="completed", summary="In short: they hold [s1][s8].", reason=""))
    assert await publisher.sync(state)
    canvas = the_canvas(fake_slack)
    assert canvas.headings()[0] == "Summary", "the summary is inserted before the first section"
    pinned = text_of(fake_slack, state.run.report_message or "")
    assert "Final" in pinned and "In short: they hold" in pinned, "the pinned message keeps summary and state"


async def test_each_new_section_is_inserted_and_a_revised_section_replaced_in_place(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    publisher = Publisher(redis, async_redis, store, client)
    state = long_report(store, state)
    assert await publisher.sync(state)
    before = the_canvas(fake_slack)
    edits = len(before.edits)

    state = store.apply(state, SectionWritten(section_id="sec9", title="Finding 9", body="Claim nine holds [s2]."))
    assert await publisher.sync(state)
    after = the_canvas(fake_slack)
    assert [e["operation"] for e in after.edits[edits:]] == ["insert_before"], "one insert, before the sources"
    assert after.headings()[-2:] == ["9. Finding 9", "Sources"]
    assert [s.markdown for s in after.sections[:8]] == [s.markdown for s in before.sections[:8]], "the rest untouched"

    edits = len(after.edits)
    state = store.apply(state, SectionRevised(section_id="sec3", body="Corrected: finding three holds [s3].",
                                              reason="a newer filing"))
    assert await publisher.sync(state)
    revised = the_canvas(fake_slack)
    [change] = revised.edits[edits:]
    assert change["operation"] == "replace" and change["section_id"] == after.sections[2].id
    assert revised.headings() == after.headings()[:2] + ["3. Finding 3 (revised ×1)"] + after.headings()[3:]
    assert "Corrected: finding three holds" in revised.sections[2].markdown
    assert "Claim a of this finding holds [[3]]" not in revised.markdown(), "the old text is gone"
    assert [s.markdown for i, s in enumerate(revised.sections) if i != 2] == \
        [s.markdown for i, s in enumerate(after.sections) if i != 2], "every other section as it was"


async def test_in_canvas_mode_even_a_short_report_lives_in_its_canvas(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    publisher = Publisher(redis, async_redis, store, client, report_mode="canvas")
    state = store.apply(state, SourceAdded(source=source(1)))
    state = store.apply(state, SectionWritten(section_id="sec1", title="Fees", body="VTI is cheap [s1]."))
    assert await publisher.sync(state)
    assert the_canvas(fake_slack).headings() == ["1. Fees", "Sources"]
    assert "is in the canvas" in text_of(fake_slack, state.run.report_message or "")


@pytest.mark.parametrize("refusal", ["canvas_disabled_user_team", "missing_scope"])
async def test_a_workspace_without_canvases_gets_the_file_once_decided_with_a_notice(
        redis: Redis, async_redis, client, fake_slack: FakeSlack, refusal: str,
        caplog: pytest.LogCaptureFixture) -> None:
    if refusal == "missing_scope":
        fake_slack.scopes = manifest_bot_scopes() - {"canvases:write"}  # installed before the scope was added
    else:
        slack_canvases.disable_canvases(fake_slack)
    store = RunStore(redis)
    one, two = await posted_run(store, client, team=TEAM_ID), await posted_run(store, client, team=TEAM_ID)
    publisher = Publisher(redis, async_redis, store, client)
    with caplog.at_level(logging.WARNING, logger="bot.publisher"):
        for state in (one, two):
            state = long_report(store, state)
            assert await publisher.sync(state)
            pinned = text_of(fake_slack, state.run.report_message or "")
            assert "is in the attached file" in pinned
            assert f"Canvases are not available in this workspace: Slack answered `{refusal}`" in pinned
    assert len(fake_slack.calls_of("canvases.create")) == 1, "asked once for the workspace"
    assert len(fake_slack.files()) == 2, "each report's full text is in its file"
    assert len([r for r in caplog.records if "refused canvases" in r.getMessage()]) == 1, "logged once"


async def test_a_canvas_someone_deleted_is_made_again(redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    publisher = Publisher(redis, async_redis, store, client)
    state = long_report(store, state)
    assert await publisher.sync(state)
    first = the_canvas(fake_slack)
    fake_slack.canvases[first.id].deleted = True  # type: ignore[attr-defined]
    state = store.apply(state, SectionRevised(section_id="sec1", body="Now [s1].", reason="newer"))
    assert not await publisher.sync(state), "a retry later is worthwhile"
    assert await publisher.sync(state)
    second = the_canvas(fake_slack)
    assert second.id != first.id and second.headings()[0] == "1. Finding 1 (revised ×1)"
    assert f"/docs/{TEAM_ID}/{second.id}|" in text_of(fake_slack, state.run.report_message or "")


async def test_section_ids_are_looked_up_only_when_an_edit_needs_one_and_told_apart_from_sections_quoting_them(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    # Twelve sections in one burst: "1. Finding 1" is inside "11. Finding 11", "12. Finding 12" and
    # the sources (which quote "Finding 1 holds."), so telling its id takes the others' ids first.
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    publisher = Publisher(redis, async_redis, store, client)
    state = long_report(store, state, sections=12)
    assert await publisher.sync(state)
    assert fake_slack.calls_of("canvases.sections.lookup") == [], "a burst of new sections costs no lookups"

    ids, edits = [s.id for s in the_canvas(fake_slack).sections], len(the_canvas(fake_slack).edits)
    state = store.apply(state, SectionRevised(section_id="sec1", body="Corrected: one holds [s1].", reason="newer"))
    assert await publisher.sync(state)
    canvas = the_canvas(fake_slack)
    [change] = canvas.edits[edits:]
    assert change["operation"] == "replace" and change["section_id"] == ids[0]
    assert canvas.headings()[0] == "1. Finding 1 (revised ×1)"
    assert "Corrected: one holds" in canvas.sections[0].markdown and len(canvas.headings()) == 13
    first = len(fake_slack.calls_of("canvases.sections.lookup"))
    # One lookup matching several sections, the twelve others found by their own headings, then it again.
    assert first == 14, "the look-alikes' ids first, then the section's"

    ids, edits = [s.id for s in canvas.sections], len(canvas.edits)
    state = store.apply(state, SectionRevised(section_id="sec5", body="Corrected: five holds [s5].", reason="newer"))
    assert await publisher.sync(state)
    canvas = the_canvas(fake_slack)
    assert [e.get("section_id") for e in canvas.edits[edits:]] == [ids[4]]
    assert canvas.headings()[4] == "5. Finding 5 (revised ×1)"
    assert len(fake_slack.calls_of("canvases.sections.lookup")) == first, "ids once known are kept"


async def test_sections_out_of_step_are_written_whole_once_and_found_again(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    publisher = Publisher(redis, async_redis, store, client)
    state = long_report(store, state)
    assert await publisher.sync(state)
    record = await publisher.messages.canvases.record(state.run.team, CHANNEL, state.run.report_message or "")  # type: ignore[union-attr]
    assert record is not None
    stale = record.model_copy(update={"placed": [p.model_copy(update={"section_id": "temp:C:gone"})
                                                 for p in record.placed]})
    await async_redis.set(keys.canvas(state.run.team, CHANNEL, state.run.report_message or ""), stale.model_dump_json())
    state = store.apply(state, SectionRevised(section_id="sec2", body="Now [s2].", reason="newer"))
    assert await publisher.sync(state)
    canvas = the_canvas(fake_slack)
    assert canvas.headings()[1] == "2. Finding 2 (revised ×1)" and len(canvas.headings()) == 9
    assert canvas.edits[-1].get("section_id") is None, "the whole document, once"
    record = await publisher.messages.canvases.record(state.run.team, CHANNEL, state.run.report_message or "")  # type: ignore[union-attr]
    assert record is not None and {p.section_id for p in record.placed} == {s.id for s in canvas.sections}


async def test_a_report_that_just_moved_into_its_canvas_is_not_tried_at_full_length_again(
        redis: Redis, async_redis, client, fake_slack: FakeSlack, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report has a canvas from the moment it is made: the message with its link is laid out as
    the summary at once, not tried at full length twice more (the dearest part of a rendering,
    and the last runs of a burst of endings waited on it: bench.publish)."""
    layouts = [0]
    full_layout = report_render._full_layout

    def counted(*args: Any) -> Any:
        layouts[0] += 1
        return full_layout(*args)

    monkeypatch.setattr(report_render, "_full_layout", counted)
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID, question="What do the findings say?")
    state = long_report(store, state)
    assert await Publisher(redis, async_redis, store, client).sync(state)
    assert the_canvas(fake_slack).headings()[-1] == "Sources"
    assert f"/docs/{TEAM_ID}/{the_canvas(fake_slack).id}|" in text_of(fake_slack, state.run.report_message or "")
    assert layouts[0] == 2, "tried in full and compact once, before the canvas existed; not again after"
