"""Slack's message limits and Web API rate tiers, named once (PLATFORM-NOTES.md).

`violations` checks a rendered message against every message limit, so the renderer,
the tests and the benchmark all agree on what "fits" means.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# --- one message ----------------------------------------------------------------------

MAX_BLOCKS = 50  # blocks per message
SECTION_TEXT_CHARS = 3_000  # text of one section block
CONTEXT_TEXT_CHARS = 3_000  # text of one context element (a text object's limit)
# All `markdown` blocks of one payload share this budget (we render mrkdwn sections instead,
# but `violations` checks it so a future markdown block cannot slip past).
MARKDOWN_BLOCKS_CHARS = 12_000
MESSAGE_TEXT_CHARS = 40_000  # the top-level `text` is truncated past this
# Undocumented: all text in one message's blocks together is refused near 13k
# (`msg_blocks_too_long`).
BLOCKS_TOTAL_CHARS = 13_000
# What the renderer allows itself of BLOCKS_TOTAL_CHARS: headroom for a limit Slack does not publish.
BLOCK_TEXT_BUDGET = 11_500
# The top-level `text` is a notification fallback when blocks are sent; keep it short.
FALLBACK_TEXT_CHARS = 2_000

# --- one streamed message (chat.startStream / appendStream / stopStream) ------------------

STREAM_MARKDOWN_CHARS = 12_000  # markdown_text of one call (the methods' pages)
STREAM_CHUNK_BLOCKS = 50  # blocks sent through `chunks` in one message (chat.stopStream's page)
# Not documented; reported by many apps: a stream stops accepting appends about five minutes
# after it started (and sooner when idle). We close ours before that and continue in a new one.
STREAM_MAX_SECONDS = 240.0
# Not documented: how many task cards and how much text one streamed message holds. We roll
# over well inside the documented per-message figures above.
STREAM_MAX_TASKS = 40
STREAM_MAX_CHARS = 10_000

# --- Web API rate tiers, per workspace and method ---------------------------------------

TIER_1_PER_MINUTE = 1  # apps.uninstall
TIER_2_PER_MINUTE = 20  # pins.add, chat.startStream, chat.stopStream, canvases.create
# chat.update, files.delete, agents.sessions.setStatus, canvases.edit, canvases.access.set
TIER_3_PER_MINUTE = 50
TIER_4_PER_MINUTE = 100  # files.getUploadURLExternal, files.completeUploadExternal, chat.appendStream
# Share of a tier we allow ourselves: Slack's window and ours never line up exactly.
RATE_HEADROOM = 0.9
# Where the operator endpoints (metrics, a worker's health) listen unless DEEPTHREAD_METRICS_HOST opens them.
LOOPBACK = "127.0.0.1"
# A newly installed workspace's monthly budget (USD) unless DEEPTHREAD_NEW_WORKSPACE_BUDGET_USD says
# otherwise: a stranger's install cannot spend the operator's model key without a bound.
NEW_WORKSPACE_BUDGET_USD = 50.0
# An app distributed to other organizations outside the Slack Marketplace (DEEPTHREAD_SLACK_DISTRIBUTED)
# may call conversations.replies and conversations.history once a minute per workspace, each answer
# holding at most 15 messages (Slack's rate-limit page, for apps created since 29 May 2025).
DISTRIBUTED_HISTORY_SECONDS = 60.0
DISTRIBUTED_HISTORY_OBJECTS = 15
# conversations.info before a run starts (is the channel shared outside?): the ack is already sent, and
# an unanswered lookup counts as shared, so a slow Slack costs only workspace results.
AUDIENCE_LOOKUP_SECONDS = 3.0


def _texts(node: Any) -> Iterator[str]:
    """Every string under a "text" key, at any depth: what Slack counts toward the total."""
    if isinstance(node, list):
        for item in node:
            yield from _texts(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "text" and isinstance(value, str):
                yield value
            else:
                yield from _texts(value)


def block_text_chars(blocks: list[dict[str, Any]]) -> int:
    return sum(len(text) for text in _texts(blocks))


def violations(text: str, blocks: list[dict[str, Any]]) -> list[str]:
    """Every Slack message limit this message breaks, in words; empty when Slack accepts it."""
    found: list[str] = []
    if len(text) > MESSAGE_TEXT_CHARS:
        found.append(f"text is {len(text):,} chars (limit {MESSAGE_TEXT_CHARS:,})")
    if len(blocks) > MAX_BLOCKS:
        found.append(f"{len(blocks)} blocks (limit {MAX_BLOCKS})")
    markdown = 0
    for i, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "section":
            size = len(block.get("text", {}).get("text", ""))
            if size > SECTION_TEXT_CHARS:
                found.append(f"section block {i} has {size:,} chars (limit {SECTION_TEXT_CHARS:,})")
        elif kind == "context":
            for element in block.get("elements", []):
                size = len(element.get("text", ""))
                if size > CONTEXT_TEXT_CHARS:
                    found.append(f"context block {i} has {size:,} chars (limit {CONTEXT_TEXT_CHARS:,})")
        elif kind == "markdown":
            markdown += len(block.get("text", ""))
    if markdown > MARKDOWN_BLOCKS_CHARS:
        found.append(f"markdown blocks have {markdown:,} chars (limit {MARKDOWN_BLOCKS_CHARS:,})")
    total = block_text_chars(blocks)
    if total > BLOCKS_TOTAL_CHARS:
        found.append(f"blocks hold {total:,} chars of text (limit ~{BLOCKS_TOTAL_CHARS:,})")
    return found
