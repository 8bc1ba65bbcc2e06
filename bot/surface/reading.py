"""What a person's message asks for, read in one pass by pure functions: serve's text reader
(bot/text_reader.py) runs them in its child when the text is long, so no pattern over a person's
text holds the loop every workspace shares. The listeners act on the answer; they match nothing
themselves."""

from __future__ import annotations

import re

from pydantic import BaseModel

from agent import MAX_QUESTION_CHARS
from bot.desk.claim_check import ClaimCheckAsk, claim_check_switch
from bot.desk.commands import SpendRequest, read_spend
from bot.desk.export import read_export
from bot.desk.library import read_library
from bot.desk.plan_first import plan_first_question, plan_first_switch
from bot.desk.recheck import RecheckCommand, parse_recheck
from bot.desk.retention import FORGET

from .evidence import SOURCE_COMMAND, SOURCES_COMMAND

__all__ = [
    "GO_DEEPER",
    "HISTORY",
    "QuestionReading",
    "SlashReading",
    "ThreadReply",
    "read_question",
    "read_slash",
    "read_thread_reply",
    "too_long",
]

GO_DEEPER = re.compile(r"^\s*(?:<@\w+>\s*)?(?:please\s+)?go\s+deeper\b[\s.!]*$", re.IGNORECASE)
HISTORY = re.compile(r"^\s*(?:<@\w+>\s*)?history(?:\s+(sec\d+))?\s*$", re.IGNORECASE)


class ThreadReply(BaseModel, frozen=True):
    """A reply in one of our threads: the first command it is, in the order they are tried, or none
    (then it steers the running research, changes the plan, or continues the thread)."""

    forget: bool = False
    recheck: RecheckCommand | None = None
    spend: SpendRequest | None = None
    claim_check: ClaimCheckAsk | None = None  # `claim check [on|off]`
    go_deeper: bool = False
    history: bool = False
    history_section: str | None = None
    footnote: int | None = None
    sources: bool = False
    library: str | None = None  # `library <words>`: the team's earlier reports
    export: str | None = None  # `export [md|pdf|docx]`: the format word ("" for Markdown)


def read_thread_reply(text: str, channel: str | None) -> ThreadReply:
    if FORGET.match(text):
        return ThreadReply(forget=True)
    library = read_library(text)
    if library is not None:
        return ThreadReply(library=library)
    export = read_export(text)
    if export is not None:
        return ThreadReply(export=export)
    recheck = parse_recheck(text)
    if recheck is not None:
        return ThreadReply(recheck=recheck)
    spend = read_spend(text, channel)
    if spend is not None:
        return ThreadReply(spend=spend)
    claim_check = claim_check_switch(text)
    if claim_check is not None:
        return ThreadReply(claim_check=claim_check)
    if GO_DEEPER.match(text):
        return ThreadReply(go_deeper=True)
    wanted = HISTORY.match(text)
    if wanted:
        return ThreadReply(history=True, history_section=wanted.group(1))
    footnote = SOURCE_COMMAND.match(text)
    if footnote:
        return ThreadReply(footnote=int(footnote.group(1)))
    return ThreadReply(sources=bool(SOURCES_COMMAND.match(text)))


class QuestionReading(BaseModel, frozen=True):
    """A new question (a mention or a direct message): a command, or the question and whether it
    asks to be planned first (`plan first: …`)."""

    spend: SpendRequest | None = None
    plan_first_switch: bool | None = None  # `plan first on|off`
    claim_check: ClaimCheckAsk | None = None  # `claim check [on|off]`
    planned: str | None = None  # the question after a `plan first:` prefix
    library: str | None = None  # `library <words>`: the team's earlier reports


def read_question(text: str, channel: str | None) -> QuestionReading:
    library = read_library(text)
    if library is not None:
        return QuestionReading(library=library)
    spend = read_spend(text, channel)
    if spend is not None:
        return QuestionReading(spend=spend)
    switch = plan_first_switch(text)
    if switch is not None:
        return QuestionReading(plan_first_switch=switch)
    claim_check = claim_check_switch(text)
    if claim_check is not None:
        return QuestionReading(claim_check=claim_check)
    return QuestionReading(planned=plan_first_question(text))


class SlashReading(BaseModel, frozen=True):
    """`/deepthread …`: the library's search, a spend command, or neither (then the help)."""

    library: str | None = None
    spend: SpendRequest | None = None


def read_slash(text: str, channel: str | None) -> SlashReading:
    library = read_library(text)
    if library is not None:
        return SlashReading(library=library)
    return SlashReading(spend=read_spend(text, channel))


def too_long(text: str, what: str = "question") -> str:
    """The advice for a text over MAX_QUESTION_CHARS: refused before anything reads it."""
    return (
        f"That {what} is {len(text):,} characters; I take up to {MAX_QUESTION_CHARS:,}. "
        f"Write the {what} in a sentence or two and share long material as a file in the thread."
    )
