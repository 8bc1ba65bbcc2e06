"""Slack's message limits, named once (PLATFORM-NOTES.md)."""
from __future__ import annotations

MAX_BLOCKS = 50  # blocks per message
SECTION_TEXT_CHARS = 3_000  # text of one section block
# Cumulative block text near 13k is refused (msg_blocks_too_long); stay clear of it.
BLOCK_TEXT_BUDGET = 11_500
MESSAGE_TEXT_CHARS = 40_000  # `text` is truncated past this
# The top-level `text` is a notification fallback when blocks are sent; keep it short.
FALLBACK_TEXT_CHARS = 2_000
