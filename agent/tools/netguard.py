"""Refuse URLs that would make the bot fetch from its own network (SSRF).

The decision comes from an explicit table of forbidden networks (the IANA IPv4 and IPv6
special-purpose registries, plus multicast and unallocated space), not from `is_global`,
whose answer for some blocks changed between Python patch releases. IPv6 forms that carry
an IPv4 address (mapped, compatible, NAT64, 6to4) are judged by the address they carry.

The address that passed the check is the one the fetch connects to, so a name that
resolves differently a moment later (DNS rebinding) cannot slip through, and however a
URL is spelled, the connection goes to the address that was judged.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

import idna

from ..exceptions import BlockedURL

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# DNS limits a name to 253 characters; anything longer is not a host name.
MAX_HOST_CHARS = 253
# What an ASCII host name may contain once IDNA-encoded (underscores occur in real DNS names).
_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")


@dataclass(frozen=True)
class Forbidden:
    network: IPNetwork
    reason: str


def _table(*rows: tuple[str, str]) -> tuple[Forbidden, ...]:
    return tuple(Forbidden(ipaddress.ip_network(cidr), reason) for cidr, reason in rows)


# IANA IPv4 Special-Purpose Address Registry (every block not globally reachable), plus multicast.
FORBIDDEN_V4 = _table(
    ("0.0.0.0/8", "'this network': 0.0.0.0 reaches the local machine"),
    ("10.0.0.0/8", "private-use network"),
    ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
    ("127.0.0.0/8", "loopback: the machine itself"),
    ("169.254.0.0/16", "link-local, where cloud metadata services answer (169.254.169.254)"),
    ("172.16.0.0/12", "private-use network"),
    ("192.0.0.0/24", "IETF protocol assignments; one cloud's metadata service answers at 192.0.0.192"),
    ("192.0.2.0/24", "documentation (TEST-NET-1)"),
    ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
    ("192.168.0.0/16", "private-use network"),
    ("198.18.0.0/15", "benchmarking network"),
    ("198.51.100.0/24", "documentation (TEST-NET-2)"),
    ("203.0.113.0/24", "documentation (TEST-NET-3)"),
    ("224.0.0.0/4", "multicast, not a web server"),
    ("240.0.0.0/4", "reserved, and 255.255.255.255 is the local broadcast"),
)

# IANA IPv6 Special-Purpose Address Registry (every block not globally reachable), plus
# multicast and the deprecated site-local block. Blocks that embed an IPv4 address are
# unwrapped first (see _EMBEDDING), so only what they carry is judged.
FORBIDDEN_V6 = _table(
    ("::/128", "unspecified address"),
    ("::1/128", "loopback: the machine itself"),
    ("64:ff9b:1::/48", "local-use NAT64: translates into the local network"),
    ("100::/64", "discard-only block"),
    ("100:0:0:1::/64", "dummy prefix"),
    ("2001::/23", "IETF protocol assignments (Teredo 2001::/32 included: it tunnels to arbitrary IPv4 hosts)"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "segment-routing identifiers"),
    ("fc00::/7", "unique-local (private) network"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "deprecated site-local (private) network"),
    ("ff00::/8", "multicast, not a web server"),
)
# Outside 2000::/3 IPv6 is unallocated or special; nothing there serves public web pages.
GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_UNALLOCATED_V6 = "outside global unicast space (2000::/3)"


@dataclass(frozen=True)
class _Embedding:
    network: ipaddress.IPv6Network
    shift: int  # the IPv4 address sits in the 32 bits above this many low bits


# IPv6 forms that carry an IPv4 address: the packet ends up at the carried address.
_EMBEDDING = tuple(
    _Embedding(ipaddress.IPv6Network(cidr), shift)
    for cidr, shift in (
        ("::ffff:0:0/96", 0),  # IPv4-mapped
        ("::ffff:0:0:0/96", 0),  # IPv4-translated (SIIT), a variant of the mapped form
        ("::/96", 0),  # IPv4-compatible (deprecated); ::1 and :: carry 0.0.0.x, also refused
        ("64:ff9b::/96", 0),  # NAT64 well-known prefix
        ("2002::/16", 80),  # 6to4: bits 16-47
    )
)


def embedded_ipv4(addr: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, if it is one of the embedding forms."""
    if isinstance(addr, ipaddress.IPv4Address):
        return None
    for form in _EMBEDDING:
        if addr in form.network:
            return ipaddress.IPv4Address((int(addr) >> form.shift) & 0xFFFFFFFF)
    return None


def forbidden_reason(addr: IPAddress) -> str | None:
    """Why `addr` may not be fetched from, or None when it is a public address."""
    carried = embedded_ipv4(addr)
    if carried is not None:
        reason = forbidden_reason(carried)
        return f"carries {carried}, {reason}" if reason else None
    table = FORBIDDEN_V4 if isinstance(addr, ipaddress.IPv4Address) else FORBIDDEN_V6
    for row in table:
        if addr in row.network:
            return row.reason
    if isinstance(addr, ipaddress.IPv6Address) and addr not in GLOBAL_UNICAST_V6:
        return _UNALLOCATED_V6
    return None


def is_public(addr: IPAddress) -> bool:
    return forbidden_reason(addr) is None


@dataclass(frozen=True)
class Target:
    """A URL's checked destination: connect to `address`, and name `host` (ASCII) in Host and SNI."""

    scheme: str
    host: str
    port: int | None  # as written in the URL; None means the scheme's default
    address: IPAddress

    @property
    def connect_port(self) -> int:
        return self.port or (443 if self.scheme == "https" else 80)


def _allowed(host: str, addr: IPAddress, allow: Iterable[str]) -> bool:
    """DEEPTHREAD_FETCH_ALLOW names hosts or networks; a carried IPv4 address counts as itself."""
    candidates = [addr] + [c for c in [embedded_ipv4(addr)] if c is not None]
    for entry in allow:
        entry = entry.strip()
        if not entry:
            continue
        if entry.lower() == host.lower():
            return True
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue
        if any(candidate in network for candidate in candidates):
            return True
    return False


def _malformed(url: str, what: str) -> BlockedURL:
    return BlockedURL(f"the URL {url!r} is malformed ({what}); check it, or search for the page instead")


def _split(url: str) -> SplitResult:
    try:
        return urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        raise _malformed(url, str(exc)) from None


def ascii_host(url: str, host: str) -> str:
    """The host as DNS and HTTP need it: IDNA-encoded names, bare IPv6 literals; refuses anything else."""
    if ":" in host:  # only an IPv6 literal has a colon once the port is split off
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _malformed(url, f"{host!r} is not an IPv6 address") from None
        return host
    if not host.isascii():
        try:
            # UTS 46 mapping then IDNA 2008, as browsers do: bücher.de -> xn--bcher-kva.de
            host = idna.encode(host, uts46=True).decode("ascii")
        except idna.IDNAError as exc:
            raise _malformed(url, f"{host!r} is not a valid international domain name: {exc}") from None
    if len(host) > MAX_HOST_CHARS or not _HOST_NAME.fullmatch(host):
        raise _malformed(url, f"{host!r} is not a host name")
    return host


def parse_url(url: str) -> tuple[str, str, int | None]:
    """Scheme, ASCII host and port of a URL that can be fetched at all; raises BlockedURL otherwise."""
    parts = _split(url)
    if parts.scheme not in ("http", "https"):
        raise BlockedURL(f"only http and https pages can be read, not {parts.scheme or 'scheme-less'} URLs")
    host = parts.hostname
    if not host:
        raise BlockedURL("the URL has no host name; pass a full URL such as https://example.com/page")
    try:
        port = parts.port
    except ValueError:
        raise BlockedURL("the URL has an invalid port; check the URL or search for the page instead") from None
    return parts.scheme, ascii_host(url, host), port


async def check_url(url: str, allow: Iterable[str] = ()) -> Target:
    """Where to connect for `url`; raises BlockedURL unless every address it resolves to is public (or allowed)."""
    scheme, host, port = parse_url(url)
    try:
        # getaddrinfo also parses decimal, hex, octal and partial spellings (2130706433,
        # 0x7f.1, 0177.0.0.1, 127.1), so every spelling is judged as the address it really is.
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port or (443 if scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except (socket.gaierror, UnicodeError, ValueError):
        raise BlockedURL(f"the host {host} does not resolve; check the URL or search for the page instead") from None
    allow = list(allow)
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses:
        raise BlockedURL(f"the host {host} does not resolve; check the URL or search for the page instead")
    for addr in addresses:
        reason = forbidden_reason(addr)
        if reason is not None and not _allowed(host, addr, allow):
            raise BlockedURL(
                f"{host} points to a private or reserved address ({addr}: {reason}); "
                "only public web pages can be read; try another source"
            )
    return Target(scheme, host, port, addresses[0])


async def resolve_checked(url: str, allow: Iterable[str] = ()) -> IPAddress:
    """The address to connect to for `url`; raises BlockedURL unless it is public (or allowed)."""
    return (await check_url(url, allow)).address
