"""Refuse URLs that would make the bot fetch from its own network (SSRF).

The address that passed the check is the one the fetch connects to, so a name that
resolves differently a moment later (DNS rebinding) cannot slip through.
"""
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


def is_public(addr: IPAddress) -> bool:
    if isinstance(addr, ipaddress.IPv6Address):
        embedded = addr.ipv4_mapped or addr.sixtofour or (addr.teredo[1] if addr.teredo else None)
        if embedded is not None:
            return is_public(embedded)
    # is_global excludes private, loopback, link-local (169.254/16, the cloud metadata
    # address), CGNAT 100.64/10, reserved, documentation and unspecified ranges.
    return addr.is_global and not addr.is_multicast


async def resolve_checked(url: str, allow: Iterable[str] = ()) -> IPAddress:
    """The address to connect to for `url`; raises BlockedURL unless every address is public (or allowed)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise BlockedURL(f"only http and https pages can be read, not {parts.scheme or 'scheme-less'} URLs")
    host = parts.hostname
    if not host:
        raise BlockedURL("the URL has no host name; pass a full URL such as https://example.com/page")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise BlockedURL("the URL has an invalid port") from None
    try:
        # getaddrinfo also parses decimal, hex and octal spellings (2130706433, 0x7f.1),
        # so every spelling is checked as the address it really is.
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise BlockedURL(f"the host {host} does not resolve; check the URL or search for the page instead") from None
    allow = list(allow)
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    for addr in addresses:
        if not is_public(addr) and not _allowed(host, addr, allow):
            raise BlockedURL(
                f"{host} points to a private or reserved address ({addr}); only public web pages can be read"
            )
    return addresses[0]
