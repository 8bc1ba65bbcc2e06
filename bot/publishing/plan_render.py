"""Plan first: the plan awaiting approval as a Slack message, with Approve and Change
(nothing is researched before the requester or an admin approves it)."""

from __future__ import annotations

from typing import Any

from agent import shorten
from bot.slack.mrkdwn_escaping import escape_text
from jobs import RunState

from .message_parts import _SLACK_USER_ID, SlackMessage, _plural, _section

__all__ = ["APPROVE_PLAN_ACTION", "CHANGE_PLAN_ACTION", "PLAN_ITEM_CHARS"]


APPROVE_PLAN_ACTION = "approve_plan"  # plan first: the requester or an admin approves the plan
CHANGE_PLAN_ACTION = "change_plan"  # plan first: how to ask for a different plan
PLAN_ITEM_CHARS = 200


def _button(action_id: str, text: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {"type": "button", "action_id": action_id, "text": {"type": "plain_text", "text": text}}
    if style:
        button["style"] = style
    return button


def _render_plan(state: RunState) -> SlackMessage:
    """Plan first: the plan awaiting approval, with Approve and Change; nothing is researched before."""
    plan = state.plan
    assert plan is not None
    if state.approved_by:
        who = (
            f"<@{state.approved_by}>" if _SLACK_USER_ID.fullmatch(state.approved_by) else escape_text(state.approved_by)
        )
        lines = [f"✅ Plan approved by {who} · research starts as soon as a worker is free"]
    else:
        lines = ["📝 *Plan for approval* · nothing is researched until the requester or an admin approves it"]
    lines.append("*Key questions*")
    lines += [f"• {escape_text(shorten(q, PLAN_ITEM_CHARS))}" for q in plan.key_questions]
    if plan.outline:
        lines.append("*Outline*")
        lines += [f"{n}. {escape_text(shorten(o, PLAN_ITEM_CHARS))}" for n, o in enumerate(plan.outline, 1)]
    lines.append(
        f"*Expected budget*: about {_plural(plan.expected_requests, 'model request')} and {plan.expected_minutes} min "
        f"({escape_text(state.run.profile)} profile)"
    )
    if plan.changes:
        lines.append(f"_Redrafted for {_plural(len(plan.changes), 'requested change')}._")
    if state.approved_by:
        text = "\n".join(lines)
        return SlackMessage(text=text, blocks=[_section(text)])
    if state.plan_expires_at is not None:
        lines.append(
            f"Expires unapproved at {state.plan_expires_at:%H:%M} UTC · reply in the thread to change the plan"
        )
    text = "\n".join(lines)
    buttons = {
        "type": "actions",
        "elements": [_button(APPROVE_PLAN_ACTION, "Approve", "primary"), _button(CHANGE_PLAN_ACTION, "Change")],
    }
    return SlackMessage(text=text, blocks=[_section(text), buttons])
