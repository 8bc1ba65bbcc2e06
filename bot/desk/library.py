"""`library <words>`: the team's earlier reports the asker can see, wherever it is asked (a mention,
a DM, a reply in one of our threads, `/deepthread library …`, the Home tab's search box).

The library ranks every report of the workspace (jobs/records/library.py); who may see one is decided
here, now, for the person asking (bot/slack/readers.py): a public channel's report to the workspace's
people, a private channel's or a DM's only to who is in it. A command word, never a paid run.
Reading the text (`read_library`, pure) is apart from answering it (`library_reply`)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from slack_sdk.web.async_client import AsyncWebClient

from bot.services import Services
from bot.slack.mrkdwn_escaping import escape_text, link
from bot.slack.readers import Readers, readers
from jobs.records.library import CANDIDATES, Library, LibraryEntry

__all__ = ["LIBRARY", "library_reply", "read_library", "render_entries", "visible_entries"]

LIBRARY = re.compile(r"^\s*(?:<@\w+>\s*)?library\b[\s:]*(?P<words>.*)$", re.IGNORECASE | re.DOTALL)
# Reports listed in one answer, and characters of a title: enough to choose, short enough for a phone.
LISTED = 8
TITLE_CHARS = 90
# Pages of the ranking read at most for one answer (CANDIDATES each) before saying what was found.
PAGES = 4
# Words of a search at most (a question pasted in whole still searches its first words).
MAX_QUERY_CHARS = 300
HOW = (
    "Write `library` and a few words, e.g. `library expense ratio VTI`: I list the team's earlier reports you can see."
)


def read_library(text: str) -> str | None:
    """The words of a `library …` command, "" for `library` alone; None when the text is not one."""
    found = LIBRARY.match(text)
    if found is None:
        return None
    return " ".join(found.group("words").split())[:MAX_QUERY_CHARS]


async def visible_entries(
    services: Services,
    client: AsyncWebClient,
    *,
    team: str | None,
    enterprise: str | None,
    user: str,
    words: str,
    limit: int = LISTED,
    seen_by: Readers | None = None,
) -> list[LibraryEntry]:
    """The best `limit` matches for `words` that `user` can read now, best first (the ranking read in
    pages of CANDIDATES until enough are left, at most PAGES of them)."""
    library = Library(services.redis)
    who = seen_by or readers()
    allowed: dict[str, bool] = {}
    found: list[LibraryEntry] = []
    for page in range(PAGES):
        ranked = await asyncio.to_thread(library.search, team, words, limit=CANDIDATES, offset=page * CANDIDATES)
        channels = [c for c in dict.fromkeys(e.channel for e in ranked) if c not in allowed]
        answers = await asyncio.gather(*(who.can_read(client, team, enterprise, user, c) for c in channels))
        allowed.update(zip(channels, answers, strict=True))
        found += [e for e in ranked if allowed[e.channel]]
        if len(found) >= limit or len(ranked) < CANDIDATES:
            break
    return found[:limit]


def _where(entry: LibraryEntry) -> str:
    if entry.channel.startswith("D"):
        return "a direct message"
    return f"<#{entry.channel}>" if entry.channel else "the terminal"


def entry_line(entry: LibraryEntry) -> str:
    """One report: its title linked to it, when, where (Slack shows a channel to who may see it)."""
    title = " ".join(entry.title.split())
    title = title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1].rstrip() + "…"
    shown = link(entry.permalink, title) if entry.permalink else escape_text(title)
    return f"• {shown} · {entry.date:%-d %b %Y} · {_where(entry)}"


def render_entries(entries: Sequence[LibraryEntry], words: str) -> str:
    if not entries:
        return (
            f"No earlier report you can see matches “{escape_text(words)}”. Try other words, or ask the question "
            "by mentioning me: the report joins the library when it is done."
        )
    head = f"*Earlier reports matching “{escape_text(words)}”* ({len(entries)}, best first, only ones you can see):"
    return "\n".join([head, *(entry_line(e) for e in entries)])


async def library_reply(
    services: Services, client: AsyncWebClient, words: str, *, team: str | None, enterprise: str | None, user: str
) -> str:
    """The answer to `library <words>`: the matching reports `user` can see, or how to ask."""
    if not words:
        return HOW
    entries = await visible_entries(services, client, team=team, enterprise=enterprise, user=user, words=words)
    return render_entries(entries, words)
