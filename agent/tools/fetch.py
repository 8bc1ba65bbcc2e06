"""Fetch one web resource: guarded on every hop, capped in bytes and time."""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from ..config import FetchConfig
from ..exceptions import FetchError
from .netguard import BlockedURL, Target, check_url

# Only encodings we can inflate with a hard output cap; brotli/zstd are not advertised.
ACCEPT_ENCODING = "gzip, deflate"


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


def _pinned(url: str, target: Target) -> tuple[str, dict[str, str], dict[str, str]]:
    """The request URL with the checked address as its host, plus the Host header and SNI name.

    The whole authority (userinfo included) is replaced, so the connection goes to the
    address that was judged whatever tricks the URL's spelling played.
    """
    parts = urlsplit(url)
    address = target.address
    ip = f"[{address}]" if address.version == 6 else str(address)
    netloc = f"{ip}:{target.port}" if target.port else ip
    name = f"[{target.host}]" if ":" in target.host else target.host  # an IPv6 literal keeps its brackets
    host_header = f"{name}:{target.port}" if target.port else name
    return urlunsplit(parts._replace(netloc=netloc)), {"Host": host_header}, {"sni_hostname": target.host}


def _redirect_target(url: str, location: str) -> str:
    """The absolute URL a Location header points to; a malformed one is a FetchError."""
    try:
        return urljoin(url, location.strip())
    except ValueError:  # e.g. an unclosed IPv6 bracket
        raise FetchError(f"{url} redirected to a malformed address ({location!r}); try another source") from None


class _Inflater:
    """Decompresses with a hard cap on output, so a gzip bomb costs at most the cap."""

    def __init__(self, encoding: str) -> None:
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            self._z = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header, detected
            self._raw_fallback = encoding == "deflate"
        else:
            raise FetchError(f"the server sent {encoding}-compressed content, which cannot be read; try another source")

    def feed(self, chunk: bytes, room: int) -> bytes:
        if self._z is None:
            return chunk[:room]
        try:
            return self._z.decompress(chunk, room)
        except zlib.error:
            if getattr(self, "_raw_fallback", False):  # some servers send raw deflate
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                self._raw_fallback = False
                return self._z.decompress(chunk, room)
            raise FetchError("the page's compressed body is corrupt; try another source") from None


# What each class of HTTP failure means, and what to do instead (the model reads these).
DENIED = (
    "the site refused to serve it: a paywall, a login or a bot wall. Do not read it again; look for the same "
    "facts in another source (the publisher's own release, an official filing or registry, another outlet). "
    "If the requester has access, the final answer can ask them to share the document in the thread"
)
GONE = (
    "the page is not there (moved or removed). Do not read the same URL again: search for its title or a "
    "distinctive phrase with web_search, or start from the site's home page"
)
LEGAL = "the site may not serve it here for legal reasons. Do not read it again; use another source"
LIMITED = "the site is rate-limiting us. Read other sources first; read this one again at most once, later in the run"
BROKEN = "the site had a server error, which often passes. Read it again once; if it fails again, use another source"
REFUSED = "the site refused the request. Do not read it again; try another source"


def status_advice(url: str, status: int) -> str:
    """The error text for a page that answered HTTP `status` (>= 400), by failure class."""
    if status in (401, 402, 403, 407):
        advice = DENIED
    elif status in (404, 410):
        advice = GONE
    elif status == 451:
        advice = LEGAL
    elif status == 429:
        advice = LIMITED
    elif status == 408 or status >= 500:
        advice = BROKEN
    else:
        advice = REFUSED
    return f"{url} answered HTTP {status}: {advice}"


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
            target = await check_url(url, config.allow)
        except BlockedURL as exc:
            raise FetchError(f"cannot read {url}: {exc}") from None
        pinned, headers, extensions = _pinned(url, target)
        headers["Accept-Encoding"] = ACCEPT_ENCODING
        try:
            request = client.build_request("GET", pinned, headers=headers, extensions=extensions)
        except httpx.InvalidURL as exc:
            raise FetchError(
                f"cannot read {url}: the URL is malformed ({exc}); check it or try another source"
            ) from None
        try:
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                if response.is_redirect:
                    location = response.headers.get("location")
                    if not location:
                        raise FetchError(f"{url} redirected without a target; try another source")
                    url = _redirect_target(url, location)
                    continue
                if response.status_code >= 400:
                    raise FetchError(status_advice(url, response.status_code))
                media, charset = _media_type(response.headers.get("content-type", ""))
                inflater = _Inflater(response.headers.get("content-encoding", ""))
                chunks: list[bytes] = []
                size = 0
                truncated = False
                async for raw in response.aiter_raw():
                    data = inflater.feed(raw, config.max_bytes - size + 1)
                    chunks.append(data)
                    size += len(data)
                    if size > config.max_bytes:
                        truncated = True
                        break
                body = b"".join(chunks)[: config.max_bytes]
                return Fetched(url, response.status_code, media, charset, body, truncated)
            finally:
                await response.aclose()
        except httpx.TimeoutException:
            raise FetchError(
                f"{url} did not answer in time; a timeout often passes: read it again once, then use another source"
            ) from None
        except (httpx.InvalidURL, httpx.RemoteProtocolError) as exc:
            # httpx parses a redirect's Location itself even when not following it, and a
            # malformed one surfaces here (InvalidURL, or "Invalid URL in location header").
            if isinstance(exc, httpx.InvalidURL) or "location header" in str(exc).lower():
                raise FetchError(f"{url} redirected to a malformed address; try another source") from None
            raise FetchError(
                f"could not fetch {url} (the server broke the HTTP protocol); try another source"
            ) from None
        except httpx.HTTPError as exc:
            raise FetchError(
                f"could not fetch {url} ({type(exc).__name__}); check the URL or try another source"
            ) from None
    raise FetchError(f"{url} redirected more than {config.max_redirects} times; try another source")
