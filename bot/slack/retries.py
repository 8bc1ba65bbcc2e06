"""Which Slack calls the SDK may send again by itself after a connection error, and which it may not.

slack_sdk's connection-error handler resends a request when the connection drops before the answer
arrives. For a read, or an edit (chat.update sets the same message to the same content), that is
harmless. For a post it is not: Slack may have stored the message already, and a resend posts it a
second time. Posts are therefore never resent by the SDK; the publisher looks for a post whose answer
was lost before posting again (bot/publishing/posting.py). 429s are still retried after Retry-After:
Slack did nothing with a call it refused for its rate.
"""

from __future__ import annotations

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

__all__ = ["POSTING_METHODS", "EditsOnlyConnectionRetry", "retry_handlers"]

# Calls that create something each time they are sent: a message, a stream message, a shared file.
POSTING_METHODS = frozenset(
    {
        "chat.postMessage",
        "chat.postEphemeral",
        "chat.startStream",
        "chat.appendStream",
        "files.completeUploadExternal",
    }
)


def _method(request: HttpRequest) -> str:
    return request.url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


class EditsOnlyConnectionRetry(AsyncConnectionErrorRetryHandler):
    """The SDK's connection-error retry, for every call but a post (see the module docstring)."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if _method(request) in POSTING_METHODS:
            return False
        return await super()._can_retry_async(state=state, request=request, response=response, error=error)


def retry_handlers(rate_limit_retries: int) -> list[AsyncRetryHandler]:
    """The app client's handlers: connection errors (never for posts), then 429s."""
    return [EditsOnlyConnectionRetry(), AsyncRateLimitErrorRetryHandler(max_retry_count=rate_limit_retries)]
