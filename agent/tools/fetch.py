"""Fetch one web resource: guarded on every hop, capped in bytes and time."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx

from ..config import FetchConfig
from .netguard import BlockedURL, check_url


class FetchError(Exception):
    """The page could not be fetched; the message tells the model what to do instead."""


@dataclass
class Fetched:
    url: str  # final URL after redirects
    status: int
    content_type: str  # lower-case media type without parameters
    charset: str | None
    body: bytes
    truncated: bool  # the byte cap cut the body


def _media_type(header: str) -> tuple[str, str | None]:
    parts = [p.strip() for p in header.split(";")]
    charset = None
    for p in parts[1:]:
        if p.lower().startswith("charset="):
            charset = p.split("=", 1)[1].strip("\"' ") or None
    return parts[0].lower(), charset


async def fetch(client: httpx.AsyncClient, url: str, config: FetchConfig) -> Fetched:
    try:
        async with asyncio.timeout(config.total_seconds):
            return await _fetch(client, url, config)
    except TimeoutError:
        raise FetchError(
            f"the page took longer than {config.total_seconds:.0f} s to arrive; try another source"
        ) from None


async def _fetch(client: httpx.AsyncClient, url: str, config: FetchConfig) -> Fetched:
    for _hop in range(config.max_redirects + 1):
        try:
            await check_url(url, config.allow)
        except BlockedURL as exc:
            raise FetchError(f"cannot read {url}: {exc}") from None
        try:
            async with client.stream("GET", url, follow_redirects=False) as response:
                if response.is_redirect:
                    location = response.headers.get("location")
                    if not location:
                        raise FetchError(f"{url} redirected without a target; try another source")
                    url = urljoin(url, location)
                    continue
                if response.status_code >= 400:
                    raise FetchError(
                        f"{url} answered HTTP {response.status_code}; try another result or the site's home page"
                    )
                media, charset = _media_type(response.headers.get("content-type", ""))
                chunks: list[bytes] = []
                size = 0
                truncated = False
                # iter_bytes decompresses, so the cap also bounds gzip bombs.
                async for chunk in response.aiter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size >= config.max_bytes:
                        truncated = True
                        break
                body = b"".join(chunks)[: config.max_bytes]
                return Fetched(str(response.url), response.status_code, media, charset, body, truncated)
        except httpx.TimeoutException:
            raise FetchError(f"{url} did not answer in time; try another source") from None
        except httpx.HTTPError as exc:
            raise FetchError(f"could not fetch {url} ({type(exc).__name__}); check the URL or try another source") from None
    raise FetchError(f"{url} redirected more than {config.max_redirects} times; try another source")
