"""The model SDK's first answer, read at start-up instead of on a loop many runs share.

The Anthropic SDK builds its response models' validators on first use (pydantic's deferred build) and
imports parts of its HTTP stack on its first request: reading the first streamed turn and the first
plain answer cost ~50-100 ms of CPU each, once per process, on whichever run came first, and every
other run of a shared loop waited that long (jobs/workers/concurrent_worker.py). `warm_up()` has the
real SDK read one answer of each kind, with tool use, from a canned transport (no network).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
from anthropic import AsyncAnthropic

__all__ = ["warm_up"]

_MESSAGE: dict[str, Any] = {
    "id": "msg_warmup",
    "type": "message",
    "role": "assistant",
    "model": "warm-up",
    "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "toolu_warmup", "name": "t", "input": {}}],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
}


def _events() -> bytes:
    start = {**_MESSAGE, "content": [], "stop_reason": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_warmup", "name": "t", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 1},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def _answer(request: httpx2.Request) -> httpx2.Response:
    if json.loads(request.content).get("stream"):
        return httpx2.Response(200, content=_events(), headers={"content-type": "text/event-stream"})
    return httpx2.Response(200, json=_MESSAGE)


async def _read_both() -> None:
    transport = httpx2.MockTransport(_answer)
    async with httpx2.AsyncClient(transport=transport) as http:
        client = AsyncAnthropic(api_key="warm-up", base_url="http://warm-up.invalid", http_client=http, max_retries=0)
        ask: dict[str, Any] = {"model": "warm-up", "max_tokens": 1, "messages": [{"role": "user", "content": "ok"}]}
        await client.messages.create(**ask)
        async with client.messages.stream(**ask) as stream:
            await stream.get_final_message()


def warm_up() -> None:
    """Read one plain and one streamed answer with the real SDK (call before the shared loop starts)."""
    asyncio.run(_read_both())
