"""👍 / 👎 on a finished report: one verdict per person per report, and what a 👎 found wrong.

A 👎 is answered with an ephemeral message (only the person sees it) asking for a reason and a
free line; its block ids carry the run id, since an ephemeral message is not a message of the run.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import (
    ActionsBlock,
    InputBlock,
    Option,
    PlainTextInputElement,
    SectionBlock,
    StaticSelectElement,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.desk.usage import conversation_kind
from bot.publishing.report_blocks import FEEDBACK_ACTION, FEEDBACK_HELPFUL, FEEDBACK_UNHELPFUL
from bot.services import Services
from bot.slack.tenancy import Tenant
from jobs.exceptions import RunNotFound
from jobs.process.metrics import metrics
from jobs.records.feedback import NOTE_CHARS, REASONS, FeedbackStore

from .actions import run_of

__all__ = ["FEEDBACK_NOTE_ACTION", "FEEDBACK_REASON_ACTION", "note_prompt", "register"]

log = logging.getLogger(__name__)

FEEDBACK_REASON_ACTION = "feedback_reason"
FEEDBACK_NOTE_ACTION = "feedback_note"
REASON_BLOCK = "feedback_reason"  # + ":" + run id
NOTE_BLOCK = "feedback_note"  # + ":" + run id
THANKS = "Thanks — noted."


def note_prompt(run_id: str) -> list[dict[str, Any]]:
    """The ephemeral question after a 👎: a short choice of what was wrong, and a free line."""
    return [
        SectionBlock(text="Sorry this report missed. What was wrong?").to_dict(),
        ActionsBlock(
            block_id=f"{REASON_BLOCK}:{run_id}",
            elements=[
                StaticSelectElement(
                    action_id=FEEDBACK_REASON_ACTION,
                    placeholder="Choose a reason",
                    options=[Option(value=value, label=label) for value, label in REASONS.items()],
                )
            ],
        ).to_dict(),
        InputBlock(
            block_id=f"{NOTE_BLOCK}:{run_id}",
            label="Anything to add? (Enter sends it)",
            dispatch_action=True,  # Enter sends the line as a block action: no modal needed
            optional=True,
            element=PlainTextInputElement(action_id=FEEDBACK_NOTE_ACTION, max_length=NOTE_CHARS),
        ).to_dict(),
    ]


def _user(body: dict[str, Any]) -> str:
    return str((body.get("user") or {}).get("id") or "")


def _first_action(body: dict[str, Any]) -> dict[str, Any]:
    return next(iter(body.get("actions") or []), {})


def _run_id_of(body: dict[str, Any]) -> str | None:
    block = str(_first_action(body).get("block_id") or "")
    for prefix in (REASON_BLOCK, NOTE_BLOCK):
        if block.startswith(prefix + ":"):
            return block[len(prefix) + 1 :]
    return None


def _note_values(body: dict[str, Any], run_id: str) -> tuple[str | None, str]:
    """The reason and line as the ephemeral form holds them now (both sent with either action)."""
    values = ((body.get("state") or {}).get("values")) or {}
    chosen = (values.get(f"{REASON_BLOCK}:{run_id}") or {}).get(FEEDBACK_REASON_ACTION) or {}
    typed = (values.get(f"{NOTE_BLOCK}:{run_id}") or {}).get(FEEDBACK_NOTE_ACTION) or {}
    action = _first_action(body)
    reason = ((chosen.get("selected_option") or action.get("selected_option")) or {}).get("value")
    line = typed.get("value") or (action.get("value") if action.get("action_id") == FEEDBACK_NOTE_ACTION else "")
    return reason, str(line or "")


def register(app: AsyncApp, services: Services) -> None:
    store = FeedbackStore(services.redis)

    @app.action(FEEDBACK_ACTION)
    async def on_feedback(ack: Any, body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]) -> None:
        await ack()
        found = await run_of(services, body, context)
        user = _user(body)
        verdict = _first_action(body).get("value")
        if found is None or not user or verdict not in (FEEDBACK_HELPFUL, FEEDBACK_UNHELPFUL):
            return
        state, channel = found
        if not state.status.finished:
            return
        sections = {s.section_id: len(s.revisions) for s in state.sections}
        where = await conversation_kind(client, channel)  # decides whether the question may be exported
        changed = await asyncio.to_thread(store.record, state.run.id, user, verdict, sections, where)
        if not changed:
            return
        metrics().feedback.labels(team=state.run.team or "-", verdict=verdict).inc()
        if verdict == FEEDBACK_UNHELPFUL:
            try:
                await client.chat_postEphemeral(
                    channel=channel,
                    user=user,
                    thread_ts=state.run.thread_ts,
                    text="Sorry this report missed. What was wrong?",
                    blocks=note_prompt(state.run.id),
                )
            except SlackApiError as e:  # the verdict stands; only the question is lost
                log.warning("feedback question not posted: %s", e.response.get("error"))

    async def on_note(ack: Any, body: dict[str, Any], client: AsyncWebClient, context: dict[str, Any]) -> None:
        await ack()
        run_id, user = _run_id_of(body), _user(body)
        if not run_id or not user:
            return
        try:
            state = await services.runs.get(run_id)
        except RunNotFound:
            return
        if state.run.team != Tenant.of_context(context, body).team:
            return  # a run of another workspace is never touched from this one
        reason, line = _note_values(body, run_id)
        saved = await asyncio.to_thread(store.note, run_id, user, reason, line)
        if saved is not None and line and body.get("response_url"):
            await _thank(client, body)

    app.action(FEEDBACK_REASON_ACTION)(on_note)
    app.action(FEEDBACK_NOTE_ACTION)(on_note)


async def _thank(client: AsyncWebClient, body: dict[str, Any]) -> None:
    """Replace the ephemeral question with a thank-you once the line is sent."""
    try:
        from slack_sdk.webhook.async_client import AsyncWebhookClient

        await AsyncWebhookClient(str(body["response_url"])).send(text=THANKS, replace_original=True)
    except Exception as e:  # noqa: BLE001 - a thank-you that fails changes nothing recorded
        log.info("feedback thank-you not sent: %s", e)
