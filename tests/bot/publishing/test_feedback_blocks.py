"""👍 / 👎 on a finished report: Slack's feedback_buttons in a context_actions block, valid by
slack_sdk's own models, on every layout (whole, spilled to a file) and only once the run is done."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.models.blocks import Block, ContextActionsBlock

from agent import Finished, SectionWritten, SourceAdded
from bot import limits
from bot.publishing.report_blocks import FEEDBACK_ACTION, FEEDBACK_HELPFUL, FEEDBACK_UNHELPFUL
from bot.publishing.report_render import render_report_parts
from bot.surface.listeners.feedback import note_prompt
from tests.bot.publishing.test_render import apply, big_run, new_state, source


def _feedback_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in blocks if b["type"] == "context_actions"]


def _valid(block: dict[str, Any]) -> None:
    parsed = Block.parse(block)
    assert isinstance(parsed, ContextActionsBlock), block
    parsed.validate_json()  # slack_sdk's own limits (element count, text and value lengths)
    assert parsed.to_dict() == block


def test_a_finished_report_ends_with_valid_feedback_buttons() -> None:
    state = apply(
        new_state(),
        SourceAdded(source=source(1)),
        SectionWritten(section_id="a", title="Fees", body="VTI charges 0.03% [s1]."),
        Finished(status="completed", summary="VTI is cheap [s1].", reason=""),
    )
    blocks = render_report_parts(state).message.blocks
    assert blocks[-1]["type"] == "context_actions", "the buttons close the report"
    (block,) = _feedback_blocks(blocks)
    _valid(block)
    (element,) = block["elements"]
    assert element["type"] == "feedback_buttons" and element["action_id"] == FEEDBACK_ACTION
    assert element["positive_button"]["value"] == FEEDBACK_HELPFUL
    assert element["negative_button"]["value"] == FEEDBACK_UNHELPFUL


def test_a_report_still_filling_in_has_no_feedback_buttons() -> None:
    state = apply(new_state(), SourceAdded(source=source(1)),
                  SectionWritten(section_id="a", title="Fees", body="VTI charges 0.03% [s1]."))
    assert _feedback_blocks(render_report_parts(state).message.blocks) == []


@settings(max_examples=12, deadline=None)
@given(sections=st.integers(1, 70), sources=st.integers(1, 220))
def test_feedback_buttons_stay_within_slacks_block_limits_at_any_size(sections: int, sources: int) -> None:
    """Whole or spilled, the buttons are there once and the message keeps to 50 blocks."""
    parts = render_report_parts(big_run(sections, sources))
    blocks = parts.message.blocks
    assert len(blocks) <= limits.MAX_BLOCKS
    (block,) = _feedback_blocks(blocks)
    _valid(block)


def test_the_thumbs_down_question_is_valid_block_kit() -> None:
    for block in note_prompt("run123"):
        parsed = Block.parse(block)
        assert parsed is not None
        parsed.validate_json()
        assert parsed.to_dict() == block
