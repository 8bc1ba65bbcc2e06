"""`export`, `export md`, `export pdf`, `export docx` in a run's thread, and the report's Export buttons:
the thread's report uploaded to the thread as a file (bot/publishing/export.py writes it). A command,
never a run; anyone who can read the thread may export what it already shows."""

from __future__ import annotations

import asyncio
import logging
import re

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.exceptions import NotInstalled
from bot.publishing.export import Format, export_file, format_of
from bot.slack.replies import reply
from jobs import RunState

__all__ = ["EXPORT", "FORMAT_NAMES", "export_report", "read_export"]

log = logging.getLogger(__name__)

# `export`, `export pdf`, `@deepthread export as docx`; what follows is read by format_of.
EXPORT = re.compile(r"^\s*+(?:<@\w++>\s*+)?export\b(?:\s++(?:as\s++)?(?P<format>\S++))?\s*+$", re.IGNORECASE)
FORMAT_NAMES = {"md": "Markdown", "pdf": "PDF", "docx": "Word"}
UNKNOWN = "I export the report as `export` (Markdown), `export pdf` or `export docx`; “{word}” is not one of those."
NOT_YET = (
    "The report is still being written: export it once the run is done (I say so in the progress message). "
    "Meanwhile the pinned report shows every section written so far."
)


def read_export(text: str) -> str | None:
    """The format word of an `export` command ("" for `export` alone); None when the text is not one."""
    found = EXPORT.match(text)
    if found is None:
        return None
    return (found.group("format") or "").rstrip(".!")


async def export_report(client: AsyncWebClient, latest: RunState, word: str, user: str) -> None:
    """Upload the thread's report as a file in `word`'s format (Markdown by default), or say why not."""
    run = latest.run
    channel, thread_ts = run.channel or "", run.thread_ts or ""
    fmt: Format | None = format_of(word) if word else "md"
    if fmt is None:
        await reply(client, channel, thread_ts, UNKNOWN.format(word=word[:40]))
        return
    if not latest.status.finished:
        await reply(client, channel, thread_ts, NOT_YET)
        return
    file = await asyncio.to_thread(export_file, latest, fmt)  # CPU work off the loop
    try:
        await client.files_upload_v2(
            channel=channel,
            thread_ts=thread_ts,
            filename=file.filename,
            content=file.content,
            title=file.title,
            initial_comment=f"The report as {FORMAT_NAMES[fmt]}, exported for <@{user}>.",
        )
    except (SlackApiError, SlackClientError, NotInstalled) as exc:
        error = exc.response.get("error") if isinstance(exc, SlackApiError) else str(exc)
        log.warning("run %s: the %s export was not uploaded: %s", run.id, fmt, error)
        await reply(
            client,
            channel,
            thread_ts,
            f"I could not upload the {FORMAT_NAMES[fmt]} file ({error}): I need files:write and to be in this "
            "channel. Try again in a minute.",
        )
