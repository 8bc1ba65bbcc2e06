"""Refuse URLs that would make the bot fetch from its own network (SSRF)."""
from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class BlockedURL(ValueError):
    """The URL may not be fetched; the message says why and what to do."""


def _allowed(host: str, addr: IPAddress, allow: Iterable[str]) -> bool:
    for entry in allow:
        entry = entry.strip()
        if not entry:
            continue
        if entry.lower() == host.lower():
            return True
        try:
            if addr in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


def _is_public(addr: IPAddress) -> bool:
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    # is_global excludes private, loopback, link-local (169.254/16, the cloud metadata
    # address), CGNAT 100.64/10, reserved and unspecified ranges; multicast is checked apart.
    return addr.is_global and not addr.is_multicast


async def check_url(url: str, allow: Iterable[str] = ()) -> None:
    """Raise BlockedURL unless every address the host resolves to is public (or allowed)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise BlockedURL(f"only http and https pages can be read, not {parts.scheme or 'this'!r} URLs")
    host = parts.hostname
    if not host:
        raise BlockedURL("the URL has no host name; pass a full URL such as https://example.com/page")
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except socket.gaierror:
        raise BlockedURL(f"the host {host} does not resolve; check the URL or search for the page instead")
    allow = list(allow)
    for info in infos:
        addr = ipaddress.ip_address(info[4][0])
        if not _is_public(addr) and not _allowed(host, addr, allow):
            raise BlockedURL(
                f"{host} points to a private or reserved address ({addr}); "
                "only public web pages can be read"
            )
