"""A fake Anthropic Messages API driven by a scripted policy.

Point the real SDK at it: `AsyncAnthropic(api_key="k", base_url=server.url)`. Requests are
validated like the real API (400 `invalid_request_error` with a precise message), the
policy decides the answer, and the answer goes back as JSON or as the real SSE stream.

Token counts are estimates: ceil(characters / 4) of the JSON-serialised tools, system and
messages. Prompt caching is modelled as an exact prefix match, as the real API does:

- the request is cut into pieces (each tool, system block, message content block) in the
  order tools → system → messages; a piece carrying `cache_control` is a breakpoint;
- each breakpoint whose prefix is at least `min_cacheable_tokens` long is written to a
  cache shared by all requests (keyed by a hash of the prefix; no expiry);
- a read happens when the prefix ending at a breakpoint, or at one of the 20 pieces
  before it (the API's lookback), was written by an earlier request;
- `cache_read_input_tokens` = the longest such prefix, `cache_creation_input_tokens` =
  what follows it up to the last breakpoint written, `input_tokens` = the rest.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import hmac
import json
import math
import re
import secrets
import string
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.anthropic_limits import OrganizationLimits

from .clouds import add_cloud_routes

# The real API's rules, named so tests can refer to them.
MAX_CACHE_BREAKPOINTS = 4
CACHE_LOOKBACK_PIECES = 20
MIN_CACHEABLE_TOKENS = 1024
CHARS_PER_TOKEN = 4
# Streamed text and tool input are cut into pieces of about this many characters (at least 2).
STREAM_CHUNK_CHARS = 40

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_USER_BLOCKS = {"text", "image", "document", "tool_result", "search_result"}
_ASSISTANT_BLOCKS = {
    "text", "tool_use", "thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result",
    "web_fetch_tool_result", "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
}
_TOOL_CHOICES = ("auto", "any", "tool", "none")

_DEFAULT_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out"),
    529: ("overloaded_error", "Overloaded"),
}


def _random_id(prefix: str) -> str:
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(secrets.choice(alphabet) for _ in range(22))


@dataclass
class Reply:
    """What the model says: Anthropic content blocks and a stop reason."""

    content: list[dict[str, Any]]
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        self.content = copy.deepcopy(self.content)
        for block in self.content:
            if block.get("type") == "tool_use":
                block.setdefault("id", _random_id("toolu_01"))
                block.setdefault("input", {})
        if self.stop_reason is None:
            has_tool = any(b.get("type") == "tool_use" for b in self.content)
            self.stop_reason = "tool_use" if has_tool else "end_turn"


def text_reply(text: str, *, stop_reason: str | None = None) -> Reply:
    return Reply([{"type": "text", "text": text}], stop_reason)


def tool_reply(*calls: tuple[str, dict[str, Any]], text: str | None = None) -> Reply:
    """One tool_use block per (name, input), after an optional text block (parallel calls)."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_use", "name": name, "input": dict(args)} for name, args in calls]
    return Reply(blocks)


Policy = Callable[[dict[str, Any]], "Reply | str"]


class FakeAPIError(Exception):
    """Raise from a policy to answer with an API error (e.g. 400 "prompt is too long")."""

    def __init__(self, status: int, message: str | None = None, error_type: str | None = None) -> None:
        default_type, default_message = _DEFAULT_ERRORS.get(status, ("api_error", "Internal server error"))
        super().__init__(message or default_message)
        self.status = status
        self.message = message or default_message
        self.error_type = error_type or default_type


class _Invalid(Exception):
    pass


@dataclass
class _Failure:
    times: int  # -1: forever
    status: int
    error_type: str
    message: str
    retry_after: float | None


@dataclass
class _Usage:
    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    total: int = field(default=0)

    def as_dict(self, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {"ephemeral_5m_input_tokens": self.cache_creation_input_tokens,
                               "ephemeral_1h_input_tokens": 0},
            "service_tier": "standard",
        }


class FakeAnthropic:
    """See the module docstring. All recorded state is safe to read from the test thread."""

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        min_cacheable_tokens: int = MIN_CACHEABLE_TOKENS,
        context_window: int | None = None,
    ) -> None:
        self.policy: Policy = policy or (lambda _req: text_reply("ok"))
        self.min_cacheable_tokens = min_cacheable_tokens
        # When set, requests whose estimated input exceeds it get the API's "prompt is too long".
        self.context_window = context_window
        self.delay = 0.0  # seconds to wait before answering (timeout tests)
        self.stream_delay = 0.0  # seconds between SSE frames
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._rejected: list[tuple[dict[str, Any], str]] = []
        self._responses: list[dict[str, Any]] = []
        self._policy_errors: list[BaseException] = []
        self._failures: list[_Failure] = []
        self._stream_failures: list[_Failure] = []
        self._served_failures: list[int] = []
        self._failing_until = 0.0  # time.monotonic() until which fail_for answers
        self._failing_seconds: float | None = None  # an outage that starts with the next request
        self._window: _Failure | None = None
        self._cache: dict[str, int] = {}  # prefix hash -> prefix length in characters
        # The organization's per-minute limits: reported on every answer, enforced once set (limit()).
        self.limits = OrganizationLimits()
        # False: an endpoint (a proxy, a gateway) that sends no `anthropic-ratelimit-*` headers.
        self.reports_limits = True
        # A provider that answers some requests its own way, before its quota counts them: for a body,
        # None (answered as usual) or (status, headers): a 429 rate_limit_error with these headers, or
        # an answer (2xx) whose headers these replace (a hostile or garbled provider, per request).
        self.answer_with: Callable[[dict[str, Any]], tuple[int, dict[str, str]] | None] | None = None
        # Thinking: when a request enables it and `thinker` is set, each answer begins with a thinking
        # block of thinker(request)'s text, signed by this fake; blocks sent back are checked against it.
        self.thinker: Callable[[dict[str, Any]], str | None] | None = None
        self._thinking_key = secrets.token_bytes(16)
        self._thinking_of_call: dict[str, list[dict[str, Any]]] = {}  # tool_use id -> thinking that preceded it
        # Server-side web search (web_search_* tools): what the index answers a query with, and
        # error codes to answer the next searches with (too_many_requests, unavailable, …).
        self.web_index: Callable[[str], list[dict[str, Any]]] = default_web_index
        # Requests that carry a web_search server tool are answered by this policy (the small model
        # running a search: it writes the search, then quotes the results with citations).
        self.search_policy: Policy = scripted_search_model
        self._search_errors: list[str] = []
        self._searches: list[str] = []
        # (cloud, path, headers, body) of every request that came through the Bedrock or Vertex routes.
        self.cloud_requests: list[tuple[str, str, dict[str, str], dict[str, Any]]] = []

    # ------------------------------------------------------- test controls

    def fail_next(
        self,
        status: int,
        times: int = 1,
        error_type: str | None = None,
        message: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        """The next `times` POST /v1/messages answer `status` with the real error body.

        The error type defaults from the status (429 rate_limit_error, 529 overloaded_error,
        500 api_error…); `retry_after` adds a `retry-after` header (seconds, may be fractional).
        """
        self._add_failure(self._failures, status, times, error_type, message, retry_after)

    def fail_always(self, status: int, error_type: str | None = None, message: str | None = None) -> None:
        self._add_failure(self._failures, status, -1, error_type, message, None)

    def fail_for(self, seconds: float, status: int = 529, retry_after: float | None = None, *,
                 from_first_request: bool = False) -> None:
        """Every POST /v1/messages answers `status` (default 529 overloaded) for the next
        `seconds`, then the service is back: an outage measured in time, not in requests.
        `from_first_request`: the outage starts with the next request instead of now (a test whose
        processes take a loaded machine's time to reach the model still meets all of it)."""
        default_type, default_message = _DEFAULT_ERRORS.get(status, ("api_error", "Internal server error"))
        with self._lock:
            self._window = _Failure(-1, status, default_type, default_message, retry_after)
            self._failing_until = math.inf if from_first_request else time.monotonic() + seconds
            self._failing_seconds = seconds if from_first_request else None

    def fail_next_stream(self, times: int = 1, error_type: str = "overloaded_error", message: str = "Overloaded") -> None:
        """The next `times` streamed answers start normally, then send an SSE `error` event and end."""
        self._add_failure(self._stream_failures, 200, times, error_type, message, None)

    def limit(self, *, requests: float | None = None, input_tokens: float | None = None,
              output_tokens: float | None = None, spent: bool = False) -> None:
        """Enforce the organization's per-minute limits (per model), as the API does: a request
        that finds a bucket empty gets 429 rate_limit_error with retry-after. `spent`: the
        organization's other users have just used this minute up (buckets start empty)."""
        self.limits.start_empty = spent
        if requests is not None:
            self.limits.requests = requests
        if input_tokens is not None:
            self.limits.input_tokens = input_tokens
        if output_tokens is not None:
            self.limits.output_tokens = output_tokens
        self.limits.enforced = True

    def fail_next_search(self, error_code: str, times: int = 1) -> None:
        """The next `times` server-side searches answer a `web_search_tool_result_error` with this code."""
        with self._lock:
            self._search_errors += [error_code] * times

    @property
    def searches(self) -> list[str]:
        """Every query the server-side web search ran, in order."""
        with self._lock:
            return list(self._searches)

    def clear_failures(self) -> None:
        with self._lock:
            self._failures.clear()
            self._stream_failures.clear()
            self._window = None

    def _add_failure(
        self, queue: list[_Failure], status: int, times: int, error_type: str | None,
        message: str | None, retry_after: float | None,
    ) -> None:
        default_type, default_message = _DEFAULT_ERRORS.get(status, ("api_error", "Internal server error"))
        with self._lock:
            queue.append(_Failure(times, status, error_type or default_type, message or default_message, retry_after))

    def _take(self, queue: list[_Failure]) -> _Failure | None:
        with self._lock:
            if queue is self._failures and self._window is not None and self._failing_seconds is not None:
                self._failing_until, self._failing_seconds = time.monotonic() + self._failing_seconds, None
            if queue is self._failures and self._window is not None and time.monotonic() < self._failing_until:
                self._served_failures.append(self._window.status)
                return self._window
            if not queue:
                return None
            failure = queue[0]
            if failure.times > 0:
                failure.times -= 1
                if failure.times == 0:
                    queue.pop(0)
            self._served_failures.append(failure.status)
            return failure

    # -------------------------------------------------------- introspection

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every accepted request body (after validation), in order."""
        with self._lock:
            return list(self._requests)

    @property
    def rejected(self) -> list[tuple[dict[str, Any], str]]:
        """(request body, error message) for every request refused with a 400."""
        with self._lock:
            return list(self._rejected)

    @property
    def responses(self) -> list[dict[str, Any]]:
        """Every message answered (streamed ones too), in order."""
        with self._lock:
            return list(self._responses)

    @property
    def served_failures(self) -> list[int]:
        """Status of every injected failure answered (fail_next/fail_always/fail_next_stream)."""
        with self._lock:
            return list(self._served_failures)

    @property
    def policy_errors(self) -> list[BaseException]:
        with self._lock:
            return list(self._policy_errors)

    # ---------------------------------------------------------------- server

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._handle_messages)
        app.router.add_post("/v1/messages/count_tokens", self._handle_count_tokens)
        add_cloud_routes(app, self)  # the same model behind Bedrock's and Vertex's routes (clouds.py)
        app.router.add_route("*", "/{tail:.*}", self._handle_unknown)
        return app

    async def _handle_unknown(self, request: web.Request) -> web.Response:
        return _error(404, "not_found_error", f"Not Found: {request.method} {request.path}")

    async def _preflight(self, request: web.Request) -> dict[str, Any] | web.Response:
        """Auth, version header and JSON body, in the order the API checks them."""
        api_key = request.headers.get("x-api-key", "").strip()
        scheme, _, bearer = request.headers.get("Authorization", "").partition(" ")
        if not api_key and not (scheme.lower() == "bearer" and bearer.strip()):
            return _error(401, "authentication_error", "x-api-key header is required")
        if not request.headers.get("anthropic-version"):
            return _error(400, "invalid_request_error", "anthropic-version: header is required")
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "invalid_request_error", "There was an error parsing the body of your request")
        if not isinstance(body, dict):
            return _error(400, "invalid_request_error", "Request body must be a JSON object")
        return body

    async def _handle_count_tokens(self, request: web.Request) -> web.Response:
        body = await self._preflight(request)
        if isinstance(body, web.Response):
            return body
        try:
            _validate(body, need_max_tokens=False)
        except _Invalid as e:
            with self._lock:
                self._rejected.append((body, str(e)))
            return _error(400, "invalid_request_error", str(e))
        pieces, _ = _pieces(body)
        return web.json_response({"input_tokens": _tokens(sum(len(p) for p in pieces))},
                                 headers={"request-id": _random_id("req_01")})

    async def _handle_messages(self, request: web.Request) -> web.StreamResponse:
        body = await self._preflight(request)
        if isinstance(body, web.Response):
            return body
        return await self.answer(request, body, stream=bool(body.get("stream")))

    async def answer(self, request: web.Request, body: dict[str, Any], *, stream: bool,
                     error: Callable[..., web.Response] | None = None,
                     streamer: Callable[[web.Request, dict[str, Any], _Failure | None], Any] | None = None,
                     limit_headers: bool = True,
                     ) -> web.StreamResponse:
        """Validate `body`, ask the policy, answer as JSON or streamed. The cloud routes (clouds.py)
        pass their own error shape and stream framing, and send no `anthropic-ratelimit-*` headers
        (Bedrock and Vertex do not); everything else is the same model."""
        fail = error or _error
        reports = limit_headers and self.reports_limits

        extra: dict[str, str] = {}  # answer_with's headers, replacing the limits' on this answer

        def limit_headers_of(model: str) -> dict[str, str]:
            return {**(self.limits.headers(model) if reports else {}), **extra}

        if self.delay:
            await asyncio.sleep(self.delay)
        failure = self._take(self._failures)
        if failure is not None:
            headers = {}
            if failure.retry_after is not None:
                headers["retry-after"] = _fmt_seconds(failure.retry_after)
            return fail(failure.status, failure.error_type, failure.message, headers)
        try:
            _validate(body, need_max_tokens=True)
            self._validate_thinking(body)
        except _Invalid as e:
            with self._lock:
                self._rejected.append((body, str(e)))
            return fail(400, "invalid_request_error", str(e))
        usage = self._usage(body)
        if self.context_window is not None and usage.total > self.context_window:
            message = f"prompt is too long: {usage.total} tokens > {self.context_window} maximum"
            with self._lock:
                self._rejected.append((body, message))
            return fail(400, "invalid_request_error", message)
        model = str(body["model"])
        special = self.answer_with(body) if self.answer_with is not None else None
        if special is not None and special[0] == 429:
            with self._lock:
                self._served_failures.append(429)
            return fail(429, "rate_limit_error", "This request would exceed your organization's rate limit.",
                        special[1])
        if special is not None:
            extra.update(special[1])
        wait = self.limits.admit(model, usage.input_tokens + usage.cache_creation_input_tokens)
        if wait is not None:
            with self._lock:
                self._served_failures.append(429)
            return fail(429, "rate_limit_error",
                        "This request would exceed your organization's rate limit. For details, refer to "
                        "https://docs.claude.com/en/api/rate-limits.",
                        {**limit_headers_of(model), "retry-after": str(max(1, math.ceil(wait)))} if reports else {})
        with self._lock:
            self._requests.append(body)
        policy = self.search_policy if _has_search_tool(body) else self.policy
        try:
            reply = policy(copy.deepcopy(body))
            if isinstance(reply, str):
                reply = text_reply(reply)
            if not isinstance(reply, Reply):
                raise TypeError(f"policy returned {type(reply).__name__}, expected Reply or str")
        except FakeAPIError as e:
            return fail(e.status, e.error_type, e.message)
        except Exception as e:  # a bug in the test's policy: make it loud
            with self._lock:
                self._policy_errors.append(e)
            return fail(500, "api_error", f"policy raised {type(e).__name__}: {e}")
        content = self._sign_thinking(body, reply.content)
        content = self._run_server_tools(body, content)
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in content) else reply.stop_reason
        output_tokens = max(1, _tokens(len(json.dumps(content))))
        message = {
            "id": _random_id("msg_01"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage.as_dict(output_tokens),
        }
        thinking_tokens = sum(_tokens(len(b.get("thinking", ""))) for b in content if b.get("type") == "thinking")
        if thinking_tokens:
            message["usage"]["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
        searches = sum(1 for b in content if b.get("type") == "server_tool_use" and b.get("name") == "web_search")
        if searches:
            message["usage"]["server_tool_use"] = {"web_search_requests": searches, "web_fetch_requests": 0}
        with self._lock:
            self._responses.append(message)
        self.limits.spend_output(model, output_tokens)
        if stream:
            failure = self._take(self._stream_failures)
            if streamer is not None:
                return await streamer(request, message, failure)
            return await self._stream(request, message, failure, limit_headers_of(model))
        return web.json_response(message, headers={"request-id": _random_id("req_01"), **limit_headers_of(model)})

    async def _stream(self, request: web.Request, message: dict[str, Any], failure: _Failure | None,
                      limit_headers: dict[str, str]) -> web.StreamResponse:
        resp = web.StreamResponse(headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "request-id": _random_id("req_01"),
            **limit_headers,
        })
        await resp.prepare(request)
        for event in stream_events(message, failure):
            frame = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
            await resp.write(frame.encode())
            if self.stream_delay:
                await asyncio.sleep(self.stream_delay)
        await resp.write_eof()
        return resp

    # ------------------------------------------------------------- thinking

    def signature(self, thinking: str) -> str:
        """The signature this fake gives a thinking block: it proves the text came back unmodified."""
        digest = hmac.new(self._thinking_key, thinking.encode(), hashlib.sha256).digest()
        return base64.b64encode(b"EqQB" + digest).decode()

    def _validate_thinking(self, body: dict[str, Any]) -> None:
        """The API's thinking rules: the parameter's shape, no forced tool use while thinking, every
        thinking block sent back signed and unmodified, and the current tool loop's thinking kept."""
        config = body.get("thinking")
        on = False
        if config is not None:
            kind = config.get("type") if isinstance(config, dict) else None
            if kind not in ("adaptive", "enabled", "disabled"):
                raise _Invalid(f"thinking: Input tag '{kind}' found using 'type' does not match any of the expected "
                               "tags: 'adaptive', 'disabled', 'enabled'")
            if kind == "enabled":
                budget = config.get("budget_tokens")
                if not isinstance(budget, int) or budget < 1024:
                    raise _Invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
                if budget >= body.get("max_tokens", 0):
                    raise _Invalid("`max_tokens` must be greater than `thinking.budget_tokens`")
            on = kind in ("adaptive", "enabled")
        choice = body.get("tool_choice")
        if on and isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
            raise _Invalid("Thinking may not be enabled when tool_choice forces tool use.")
        messages = body.get("messages") or []
        for i, msg in enumerate(messages):
            content = msg.get("content")
            for j, block in enumerate(content if isinstance(content, list) else []):
                if block.get("type") != "thinking":
                    continue
                signature = block.get("signature")
                if not isinstance(signature, str) or not signature:
                    raise _Invalid(f"messages.{i}.content.{j}.thinking.signature: Field required")
                if not hmac.compare_digest(signature, self.signature(str(block.get("thinking", "")))):
                    raise _Invalid(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
        if not on or len(messages) < 2:
            return
        last_user, assistant = messages[-1], messages[-2]
        user_blocks = last_user.get("content") if isinstance(last_user.get("content"), list) else []
        if not (user_blocks and user_blocks[0].get("type") == "tool_result"):
            return  # not inside a tool loop: earlier thinking may be dropped
        blocks = assistant.get("content") if isinstance(assistant.get("content"), list) else []
        with self._lock:
            issued = next((self._thinking_of_call[b["id"]] for b in blocks
                           if b.get("type") == "tool_use" and b.get("id") in self._thinking_of_call), None)
        if issued and blocks[: len(issued)] != issued:
            first = blocks[0].get("type") if blocks else "nothing"
            raise _Invalid(
                f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                f"`{first}`. When `thinking` is enabled, a final `assistant` message must start with a thinking "
                "block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you "
                "include thinking blocks from previous turns. To avoid this requirement, disable `thinking`.")

    def _sign_thinking(self, body: dict[str, Any], content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Thinking only where the request enabled it: the thinker's block first, every block signed."""
        config = body.get("thinking")
        on = isinstance(config, dict) and config.get("type") in ("adaptive", "enabled")
        if not on:
            return [b for b in content if b.get("type") not in ("thinking", "redacted_thinking")]
        thought = self.thinker(copy.deepcopy(body)) if self.thinker else None
        if thought and not any(b.get("type") == "thinking" for b in content):
            content = [{"type": "thinking", "thinking": thought}, *content]
        signed = [dict(b, signature=self.signature(b.get("thinking", ""))) if b.get("type") == "thinking" else b
                  for b in content]
        thinking = [b for b in signed if b.get("type") == "thinking"]
        if thinking:
            with self._lock:
                for b in signed:
                    if b.get("type") == "tool_use":
                        self._thinking_of_call[b["id"]] = copy.deepcopy(thinking)
        return signed

    # --------------------------------------------------------- server tools

    def _run_server_tools(self, body: dict[str, Any], content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each `server_tool_use` of web_search the model wrote is run here and answered, right after
        it, with a `web_search_tool_result` (results, or an error code); then the model goes on
        writing from what it found (the policy is asked again with its turn so far)."""
        tool = next((t for t in body.get("tools") or [] if str(t.get("type", "")).startswith("web_search_")), None)
        if tool is None or not any(b.get("type") == "server_tool_use" for b in content):
            return content
        max_uses = tool.get("max_uses")
        out: list[dict[str, Any]] = []
        used = 0
        for block in content:
            out.append(block)
            if block.get("type") != "server_tool_use" or block.get("name") != "web_search":
                continue
            block.setdefault("id", _random_id("srvtoolu_01"))
            used += 1
            query = str((block.get("input") or {}).get("query", ""))
            out.append({"type": "web_search_tool_result", "tool_use_id": block["id"],
                        "content": self._search(tool, query, over=max_uses is not None and used > max_uses)})
        partial = copy.deepcopy(body)
        partial["messages"] = [*partial["messages"], {"role": "assistant", "content": out}]
        more = self.search_policy(partial)
        more = text_reply(more) if isinstance(more, str) else more
        # The model goes on in the same response: text citing the results, possibly a client tool call.
        return out + [b for b in more.content if b.get("type") in ("text", "tool_use")]

    def _search(self, tool: dict[str, Any], query: str, *, over: bool) -> Any:
        if over:
            return {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}
        if len(query) > 500:
            return {"type": "web_search_tool_result_error", "error_code": "query_too_long"}
        with self._lock:
            code = self._search_errors.pop(0) if self._search_errors else None
            if code is None:
                self._searches.append(query)
        if code is not None:
            return {"type": "web_search_tool_result_error", "error_code": code}
        allowed, blocked = tool.get("allowed_domains") or [], tool.get("blocked_domains") or []

        def keep(url: str) -> bool:
            host = url.split("/")[2] if "//" in url else url
            hit = lambda domains: any(host == d or host.endswith("." + d) for d in domains)  # noqa: E731
            return (not allowed or hit(allowed)) and not hit(blocked)

        return [{"type": "web_search_result", "url": r["url"], "title": r["title"],
                 "page_age": r.get("page_age"), "encrypted_content": _seal(r.get("text", ""))}
                for r in self.web_index(query) if keep(r["url"])]

    # ----------------------------------------------------------- token model

    def _usage(self, body: dict[str, Any]) -> _Usage:
        pieces, breakpoints = _pieces(body)
        ends: list[int] = []
        hashes: list[str] = []
        running = hashlib.sha256()
        total = 0
        for piece in pieces:
            running.update(piece.encode())
            total += len(piece)
            ends.append(total)
            hashes.append(running.copy().hexdigest())
        total_tokens = _tokens(total)
        if not breakpoints:
            return _Usage(total_tokens, 0, 0, total_tokens)
        with self._lock:
            read_chars = 0
            for bp in breakpoints:
                for k in range(bp, max(-1, bp - CACHE_LOOKBACK_PIECES - 1), -1):
                    if hashes[k] in self._cache:
                        read_chars = max(read_chars, ends[k])
                        break
            written_end = 0
            for bp in breakpoints:
                if _tokens(ends[bp]) >= self.min_cacheable_tokens:
                    self._cache[hashes[bp]] = ends[bp]
                    written_end = max(written_end, ends[bp])
        read = _tokens(read_chars)
        creation = max(0, _tokens(written_end) - read)
        return _Usage(total_tokens - read - creation, creation, read, total_tokens)


# ------------------------------------------------------------------ helpers


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def _fmt_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


def _error(status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    request_id = _random_id("req_01")
    body = {"type": "error", "error": {"type": error_type, "message": message}, "request_id": request_id}
    return web.json_response(body, status=status, headers={"request-id": request_id, **(headers or {})})


def _strip_cache_control(block: Any) -> tuple[Any, bool]:
    """The block without cache_control (markers are not part of the cached content), and whether it had one."""
    if not isinstance(block, dict):
        return block, False
    marked = "cache_control" in block
    clean = {k: v for k, v in block.items() if k != "cache_control"}
    if isinstance(clean.get("content"), list):  # tool_result content blocks can carry markers too
        inner = [_strip_cache_control(b) for b in clean["content"]]
        clean["content"] = [b for b, _ in inner]
        marked = marked or any(m for _, m in inner)
    return clean, marked


def _pieces(body: dict[str, Any]) -> tuple[list[str], list[int]]:
    """Serialised pieces in cache order (tools, system, messages) and the indexes of breakpoints."""
    pieces: list[str] = []
    breakpoints: list[int] = []

    def add(value: Any) -> None:
        clean, marked = _strip_cache_control(value)
        if marked:
            breakpoints.append(len(pieces))
        pieces.append(json.dumps(clean, sort_keys=True, ensure_ascii=False, separators=(",", ":")))

    for tool in body.get("tools") or []:
        add(tool)
    system = body.get("system")
    if isinstance(system, str):
        add(system)
    elif isinstance(system, list):
        for block in system:
            add(block)
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, str):
            add([msg.get("role"), content])
        else:
            for block in content or []:
                clean, marked = _strip_cache_control(block)
                if marked:
                    breakpoints.append(len(pieces))
                pieces.append(json.dumps([msg.get("role"), clean], sort_keys=True, ensure_ascii=False,
                                         separators=(",", ":")))
    return pieces, breakpoints


def _chunks(s: str) -> list[str]:
    """Split into at least two pieces (when possible), like the API's incremental deltas."""
    if len(s) < 2:
        return [s]
    n = max(2, math.ceil(len(s) / STREAM_CHUNK_CHARS))
    size = math.ceil(len(s) / n)
    return [s[i:i + size] for i in range(0, len(s), size)]


def _stream_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The SSE events the API sends for `message`, in the real order."""
    start = dict(message, content=[], stop_reason=None, stop_sequence=None,
                 usage=dict(message["usage"], output_tokens=1))
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(message["content"]):
        kind = block.get("type")
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            head = {"type": "text", "text": ""}
            # A cited text block: its citations arrive first, one citations_delta each, as the API sends them.
            deltas = [{"type": "citations_delta", "citation": c} for c in block.get("citations") or []]
            deltas += [{"type": "text_delta", "text": c} for c in _chunks(block.get("text", ""))]
        elif kind == "tool_use":
            head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block.get("input", {}))
            deltas = [{"type": "input_json_delta", "partial_json": c} for c in _chunks(raw)]
        elif kind == "thinking":
            head = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(block.get("thinking", ""))]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        else:
            head = block  # other blocks arrive whole
        events.append({"type": "content_block_start", "index": i, "content_block": head})
        if i == 0:
            events.append({"type": "ping"})
        events += [{"type": "content_block_delta", "index": i, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": i})
    if not message["content"]:
        events.append({"type": "ping"})
    events.append({
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    })
    events.append({"type": "message_stop"})
    return events


# --------------------------------------------------------------- validation


def _validate(body: dict[str, Any], *, need_max_tokens: bool) -> None:
    """Raise _Invalid with the API's kind of message for the first rule the body breaks."""
    if "model" not in body:
        raise _Invalid("model: Field required")
    if not isinstance(body["model"], str) or not body["model"]:
        raise _Invalid("model: Input should be a valid string")
    if need_max_tokens:
        if "max_tokens" not in body:
            raise _Invalid("max_tokens: Field required")
        mt = body["max_tokens"]
        if not isinstance(mt, int) or isinstance(mt, bool):
            raise _Invalid("max_tokens: Input should be a valid integer")
        if mt < 1:
            raise _Invalid("max_tokens: Input should be greater than or equal to 1")
    if "messages" not in body:
        raise _Invalid("messages: Field required")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _Invalid("messages: Input should be a valid list")
    if not messages:
        raise _Invalid("messages: at least one message is required")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise _Invalid("stream: Input should be a valid boolean")
    _validate_model_rules(body)
    temperature = body.get("temperature")
    if temperature is not None and not (isinstance(temperature, (int, float)) and 0 <= temperature <= 1):
        raise _Invalid("temperature: Input should be a number between 0 and 1")
    _validate_system(body.get("system"))
    tool_names = _validate_tools(body.get("tools"))
    _validate_tool_choice(body.get("tool_choice"), tool_names, "tools" in body)
    _validate_messages(messages)
    count = _count_cache_control(body)
    if count > MAX_CACHE_BREAKPOINTS:
        raise _Invalid(f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
                       f"Found {count}.")


# What recent models refuse (PLATFORM-NOTES, December 2026), by model id as the first-party API names it.
REFUSES_FORCED_TOOL_CHOICE = {"claude-sonnet-5-5", "claude-haiku-5-5", "claude-sonnet-5", "claude-opus-5"}
REFUSES_SAMPLING = {"claude-sonnet-5", "claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5"}


def _validate_model_rules(body: dict[str, Any]) -> None:
    model = body.get("model")
    choice = body.get("tool_choice")
    if model in REFUSES_FORCED_TOOL_CHOICE and isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        raise _Invalid(f"tool_choice: `{choice.get('type')}` is not supported by {model}; use `auto` or `none`")
    if model in REFUSES_SAMPLING:
        for name in ("temperature", "top_p", "top_k"):
            if name in body:
                raise _Invalid(f"{name}: not supported by {model}; remove it to use the model's default sampling")


def _validate_cache_control(block: dict[str, Any], where: str) -> None:
    cc = block.get("cache_control")
    if cc is None:
        return
    if not isinstance(cc, dict) or cc.get("type") != "ephemeral":
        raise _Invalid(f"{where}.cache_control.type: Input should be 'ephemeral'")
    if "ttl" in cc and cc["ttl"] not in ("5m", "1h"):
        raise _Invalid(f"{where}.cache_control.ttl: Input should be '5m' or '1h'")


def _validate_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise _Invalid("system: Input should be a valid string or a list of text blocks")
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise _Invalid(f"system.{i}.type: Input should be 'text'")
        if not isinstance(block.get("text"), str):
            raise _Invalid(f"system.{i}.text: Field required")
        if not block["text"].strip():
            raise _Invalid("system: text content blocks must be non-empty")
        _validate_cache_control(block, f"system.{i}")


def _validate_tools(tools: Any) -> set[str]:
    if tools is None:
        return set()
    if not isinstance(tools, list):
        raise _Invalid("tools: Input should be a valid list")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise _Invalid(f"tools.{i}: Input should be a valid dictionary")
        if "name" not in tool:
            raise _Invalid(f"tools.{i}.name: Field required")
        if not isinstance(tool["name"], str) or not _TOOL_NAME.match(tool["name"]):
            raise _Invalid(f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
        if tool["name"] in names:
            raise _Invalid("tools: Tool names must be unique.")
        names.add(tool["name"])
        _validate_cache_control(tool, f"tools.{i}")
        if tool.get("type") not in (None, "custom"):
            _validate_server_tool(tool, i)
            continue  # a server tool (web_search_…): no input_schema
        if "description" in tool and not isinstance(tool["description"], str):
            raise _Invalid(f"tools.{i}.custom.description: Input should be a valid string")
        if "input_schema" not in tool:
            raise _Invalid(f"tools.{i}.custom.input_schema: Field required")
        schema = tool["input_schema"]
        if not isinstance(schema, dict):
            raise _Invalid(f"tools.{i}.custom.input_schema: Input should be a valid dictionary")
        if schema.get("type") != "object":
            raise _Invalid(f"tools.{i}.custom.input_schema.type: Input should be 'object'")
    return names


def _validate_tool_choice(choice: Any, tool_names: set[str], has_tools: bool) -> None:
    if choice is None:
        return
    if not isinstance(choice, dict):
        raise _Invalid("tool_choice: Input should be a valid dictionary")
    kind = choice.get("type")
    if kind not in _TOOL_CHOICES:
        raise _Invalid(f"tool_choice: Input tag '{kind}' found using 'type' does not match any of the "
                       "expected tags: 'auto', 'any', 'tool', 'none'")
    if kind in ("any", "tool") and not has_tools:
        raise _Invalid("tool_choice may only be specified while providing tools.")
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str):
            raise _Invalid("tool_choice.tool.name: Field required")
        if name not in tool_names:
            raise _Invalid(f"tool_choice.tool.name: Tool '{name}' not found in tools")


def _validate_messages(messages: list[Any]) -> None:
    seen_tool_ids: set[str] = set()
    prev_tool_ids: list[str] = []  # tool_use ids of the previous (assistant) message
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise _Invalid(f"messages.{i}: Input should be a valid dictionary")
        role = msg.get("role")
        if role not in ("user", "assistant"):
            raise _Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise _Invalid('messages: first message must use the "user" role')
        if i > 0 and messages[i - 1].get("role") == role:
            raise _Invalid(f'messages: roles must alternate between "user" and "assistant", '
                           f'but found multiple "{role}" roles in a row')
        if "content" not in msg:
            raise _Invalid(f"messages.{i}.content: Field required")
        content = msg["content"]
        is_last = i == len(messages) - 1
        blocks = _validate_content(content, i, role, is_last)
        if role == "user":
            _validate_tool_results(blocks, i, prev_tool_ids)
            prev_tool_ids = []
        else:
            prev_tool_ids = []
            for j, block in enumerate(blocks):
                if block.get("type") == "tool_use":
                    if block["id"] in seen_tool_ids:
                        raise _Invalid(f"messages.{i}.content.{j}: `tool_use` ids must be unique")
                    seen_tool_ids.add(block["id"])
                    prev_tool_ids.append(block["id"])


def _validate_content(content: Any, i: int, role: str, is_last: bool) -> list[dict[str, Any]]:
    """Check one message's content; return it as a list of blocks."""
    if isinstance(content, str):
        if not content and not (is_last and role == "assistant"):
            raise _Invalid(f"messages.{i}: all messages must have non-empty content except for the "
                           "optional final assistant message")
        if is_last and role == "assistant" and content != content.rstrip():
            raise _Invalid("messages: final assistant content cannot end with trailing whitespace")
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise _Invalid(f"messages.{i}.content: Input should be a valid string or a list of content blocks")
    if not content and not (is_last and role == "assistant"):
        raise _Invalid(f"messages.{i}: all messages must have non-empty content except for the "
                       "optional final assistant message")
    allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
    for j, block in enumerate(content):
        where = f"messages.{i}.content.{j}"
        if not isinstance(block, dict) or "type" not in block:
            raise _Invalid(f"{where}.type: Field required")
        kind = block["type"]
        if kind not in _USER_BLOCKS | _ASSISTANT_BLOCKS:
            raise _Invalid(f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected tags")
        if kind not in allowed:
            raise _Invalid(f"{where}: `{kind}` blocks are not allowed in `{role}` messages")
        _validate_cache_control(block, where)
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise _Invalid(f"{where}.text: Field required")
            if not block["text"]:
                raise _Invalid("messages: text content blocks must be non-empty")
            if not block["text"].strip():
                raise _Invalid("messages: text content blocks must contain non-whitespace text")
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not _TOOL_ID.match(block["id"]):
                raise _Invalid(f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
            if not isinstance(block.get("name"), str) or not block["name"]:
                raise _Invalid(f"{where}.name: Field required")
            if not isinstance(block.get("input"), dict):
                raise _Invalid(f"{where}.input: Input should be a valid dictionary")
        elif kind == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise _Invalid(f"{where}.tool_use_id: Field required")
            inner = block.get("content")
            if inner is not None and not isinstance(inner, (str, list)):
                raise _Invalid(f"{where}.content: Input should be a valid string or a list of content blocks")
            for k, sub in enumerate(inner if isinstance(inner, list) else []):
                if not isinstance(sub, dict) or sub.get("type") not in ("text", "image", "document", "search_result"):
                    raise _Invalid(f"{where}.content.{k}.type: Input should be 'text', 'image', 'document' "
                                   "or 'search_result'")
                if sub["type"] == "text" and not (isinstance(sub.get("text"), str) and sub["text"].strip()):
                    raise _Invalid("messages: text content blocks must be non-empty")
                _validate_cache_control(sub, f"{where}.content.{k}")
            if "is_error" in block and not isinstance(block["is_error"], bool):
                raise _Invalid(f"{where}.is_error: Input should be a valid boolean")
    if is_last and role == "assistant" and content:
        last = content[-1]
        if last.get("type") == "text" and last["text"] != last["text"].rstrip():
            raise _Invalid("messages: final assistant content cannot end with trailing whitespace")
    return content


def _validate_tool_results(blocks: list[dict[str, Any]], i: int, expected: list[str]) -> None:
    """tool_results first, one per tool_use of the previous message, and only for those."""
    leading: list[str] = []
    for j, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            break
        leading.append(block["tool_use_id"])
    missing = [tid for tid in expected if tid not in leading]
    if missing:
        raise _Invalid(f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
                       f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                       "`tool_result` block in the next message.")
    seen: set[str] = set()
    for j, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            continue
        tid = block["tool_use_id"]
        if j >= len(leading):
            raise _Invalid(f"messages.{i}.content.{j}: `tool_result` blocks must come before any other "
                           "content in the user message")
        if tid not in expected:
            raise _Invalid(f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                           f"{tid}. Each `tool_result` block must have a corresponding `tool_use` block in the "
                           "previous message.")
        if tid in seen:
            raise _Invalid(f"messages.{i}.content.{j}: each tool_use must have a single result. Found multiple "
                           f"`tool_result` blocks with id: {tid}")
        seen.add(tid)


def _count_cache_control(body: dict[str, Any]) -> int:
    count = sum(1 for t in body.get("tools") or [] if isinstance(t, dict) and "cache_control" in t)
    system = body.get("system")
    if isinstance(system, list):
        count += sum(1 for b in system if isinstance(b, dict) and "cache_control" in b)
    for msg in body.get("messages") or []:
        content = msg.get("content") if isinstance(msg, dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            count += "cache_control" in block
            inner = block.get("content")
            if isinstance(inner, list):
                count += sum(1 for b in inner if isinstance(b, dict) and "cache_control" in b)
    return count


# Server tools this fake runs or accepts, by type.
SERVER_TOOL_TYPES = {"web_search_20250305", "web_search_20260209", "web_search_20260318",
                     "web_fetch_20250910", "web_fetch_20260318"}


def _validate_server_tool(tool: dict[str, Any], i: int) -> None:
    kind = tool.get("type")
    if kind not in SERVER_TOOL_TYPES:
        raise _Invalid(f"tools.{i}: Input tag '{kind}' found using 'type' does not match any of the expected tags")
    family = "web_search" if str(kind).startswith("web_search") else "web_fetch"
    if tool.get("name") != family:
        raise _Invalid(f"tools.{i}.{kind}.name: Input should be '{family}'")
    if tool.get("allowed_domains") and tool.get("blocked_domains"):
        raise _Invalid(f"tools.{i}: allowed_domains and blocked_domains cannot be used together")
    max_uses = tool.get("max_uses")
    if max_uses is not None and (not isinstance(max_uses, int) or max_uses < 1):
        raise _Invalid(f"tools.{i}.{kind}.max_uses: Input should be greater than 0")


def _seal(text: str) -> str:
    """This fake's "encrypted" page content: opaque to the client, readable by the scripted model."""
    return base64.b64encode(b"enc1:" + text.encode()).decode()


def unseal(encrypted: str) -> str:
    """What a model reads in an encrypted_content (scripted policies only: clients leave it alone)."""
    raw = base64.b64decode(encrypted)
    return raw[len(b"enc1:"):].decode() if raw.startswith(b"enc1:") else ""


def default_web_index(query: str) -> list[dict[str, Any]]:
    """Three deterministic results per query, each with a dated page whose text names the query."""
    slug = re.sub(r"[^a-z0-9]+", "-", query.lower()).strip("-") or "q"
    return [{"url": f"https://{site}/{slug}", "title": f"{query.title()} — {site}", "page_age": age,
             "text": f"{site} reports on {query}: the figure for 2026 is {n}.{n}%."}
            for n, (site, age) in enumerate((("example.org", "March 3, 2026"), ("news.example.com", "2 days ago"),
                                              ("data.example.net", None)), 1)]


def stream_events(message: dict[str, Any], failure: _Failure | None = None) -> list[dict[str, Any]]:
    """The SSE events of `message`; with a failure, message_start and ping, then the error the API
    sends mid-stream when overloaded."""
    events = _stream_events(message)
    if failure is not None:
        events = events[:2] + [{"type": "error", "error": {"type": failure.error_type, "message": failure.message}}]
    return events


def _has_search_tool(body: dict[str, Any]) -> bool:
    return any(str(t.get("type", "")).startswith("web_search_") for t in body.get("tools") or [] if isinstance(t, dict))


def scripted_search_model(body: dict[str, Any]) -> Reply:
    """The small model with the web_search server tool: it searches the query in <query> once,
    then (asked again with its results, see _run_server_tools) quotes each result's first
    sentence, cited with a web_search_result_location as the API does."""
    last = body["messages"][-1]
    if last["role"] == "user":
        text = last["content"] if isinstance(last["content"], str) else " ".join(
            b.get("text", "") for b in last["content"] if b.get("type") == "text")
        found = re.search(r"<query>(.*?)</query>", text, re.S)
        query = found.group(1).strip() if found else text.strip()[:200]
        return Reply([{"type": "text", "text": "I'll search for that."},
                      {"type": "server_tool_use", "name": "web_search", "input": {"query": query}}], "end_turn")
    blocks: list[dict[str, Any]] = []
    for block in last["content"]:
        if block.get("type") != "web_search_tool_result":
            continue
        if not isinstance(block["content"], list):
            blocks.append({"type": "text", "text": "The search returned an error."})
            continue
        for i, result in enumerate(block["content"]):
            sentence = re.split(r"(?<=[.!?])\s+", unseal(result["encrypted_content"]).strip())[0]
            if sentence:
                blocks.append({"type": "text", "text": sentence, "citations": [{
                    "type": "web_search_result_location", "url": result["url"], "title": result["title"],
                    "encrypted_index": base64.b64encode(f"idx{i}".encode()).decode(), "cited_text": sentence}]})
    return Reply(blocks or [{"type": "text", "text": "Nothing relevant was found."}], "end_turn")
