"""The private-address guard: every forbidden network, in every spelling, through every URL trick.

Spellings are generated from the guard's own table (each forbidden network × decimal, hex,
octal, dotted-partial, Unicode-digit and IPv6-embedded forms × userinfo, fragment and query
tricks), so a block added to the table is tested in every spelling without a new line here.
"""
from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Callable, Iterator
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import FetchConfig
from agent.tools.fetch import FetchError, fetch
from agent.tools.netguard import (
    FORBIDDEN_V4,
    FORBIDDEN_V6,
    BlockedURL,
    Forbidden,
    check_url,
    embedded_ipv4,
    forbidden_reason,
    parse_url,
    resolve_checked,
)
from tests.fakes.web import FakeWeb

V4 = ipaddress.IPv4Address
V6 = ipaddress.IPv6Address

# --- spellings ---------------------------------------------------------------------------


def v4_spellings(addr: V4) -> dict[str, str]:
    """Every way a URL host can name `addr` that the system resolver reads as that address."""
    a, b, c, d = addr.packed
    n = int(addr)
    fullwidth = str.maketrans("0123456789.", "０１２３４５６７８９．")
    return {
        "dotted": str(addr),
        "decimal": str(n),
        "hex": hex(n),
        "octal-dotted": ".".join(f"0{octet:o}" for octet in addr.packed),
        "hex-dotted": ".".join(hex(octet) for octet in addr.packed),
        "partial-3": f"{a}.{b}.{(c << 8) | d}",  # a.b.c with a 16-bit last part: 127.0.1
        "partial-2": f"{a}.{(b << 16) | (c << 8) | d}",  # a.b with a 24-bit last part: 127.1
        "mixed": f"{hex(a)}.0{b:o}.{(c << 8) | d}",
        "fullwidth-digits": str(addr).translate(fullwidth),  # IDNA maps these to ASCII
        "ideographic-dots": str(addr).replace(".", "。"),
        "mapped": f"[::ffff:{addr}]",
        "mapped-hex": f"[::ffff:{(n >> 16):x}:{(n & 0xFFFF):x}]",
        "mapped-long": f"[0:0:0:0:0:FFFF:{addr}]",
        "translated": f"[::ffff:0:{addr}]",
        "compatible": f"[::{addr}]",
        "nat64": f"[64:ff9b::{addr}]",
        "6to4": f"[2002:{(n >> 16):x}:{(n & 0xFFFF):x}::1]",
    }


def v6_spellings(addr: V6) -> dict[str, str]:
    return {
        "compressed": f"[{addr.compressed}]",
        "exploded": f"[{addr.exploded}]",
        "upper": f"[{addr.exploded.upper()}]",
    }


TRICKS: dict[str, Callable[[str], str]] = {
    "plain": lambda host: f"http://{host}/",
    "port": lambda host: f"https://{host}:8443/path",
    "userinfo": lambda host: f"http://good.com@{host}/",
    "userinfo-password-port": lambda host: f"http://user:pass@{host}:8080/x",
    "fragment": lambda host: f"http://{host}#@good.com/",
    "query": lambda host: f"http://{host}?@good.com/",
    "backslash": lambda host: f"http://good.com\\@{host}/",
}


def samples(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The first, last and a middle address of a block."""
    return list(dict.fromkeys([network[0], network[-1], network[network.num_addresses // 2]]))


def forbidden_urls() -> Iterator[tuple[str, str]]:
    for row in FORBIDDEN_V4:
        for addr in samples(row.network):
            assert isinstance(addr, V4)
            for spelling, host in v4_spellings(addr).items():
                for trick, make in TRICKS.items():
                    yield f"{row.network} {spelling} {trick}", make(host)
    for row in FORBIDDEN_V6:
        for addr in samples(row.network):
            assert isinstance(addr, V6)
            for spelling, host in v6_spellings(addr).items():
                for trick, make in TRICKS.items():
                    yield f"{row.network} {spelling} {trick}", make(host)


# --- the table ---------------------------------------------------------------------------


@pytest.mark.parametrize("cidr", [
    "192.0.0.0/24", "192.88.99.0/24", "100.64.0.0/10", "198.18.0.0/15", "169.254.0.0/16",
    "64:ff9b:1::/48", "fec0::/10", "fc00::/7", "fe80::/10", "2001::/32", "100::/64",
])
def test_blocks_named_in_the_issue_are_refused_outright(cidr: str) -> None:
    network = ipaddress.ip_network(cidr)
    for addr in samples(network):
        assert forbidden_reason(addr) is not None, addr


def test_every_table_row_says_why() -> None:
    for row in FORBIDDEN_V4 + FORBIDDEN_V6:
        assert len(row.reason) > 8, row


async def test_every_forbidden_network_in_every_spelling_and_trick_is_refused() -> None:
    checked = 0
    for label, url in forbidden_urls():
        with pytest.raises(BlockedURL, match="private or reserved") as caught:
            await resolve_checked(url)
        assert "only public web pages" in str(caught.value), label
        checked += 1
    assert checked > 3000  # the product really was generated


@settings(max_examples=300, deadline=None)
@given(row=st.sampled_from(FORBIDDEN_V4), offset=st.integers(min_value=0), data=st.data())
async def test_any_address_of_a_forbidden_ipv4_block_is_refused_in_any_spelling(
    row: Forbidden, offset: int, data: st.DataObject
) -> None:
    addr = row.network[offset % row.network.num_addresses]
    assert isinstance(addr, V4)
    spelling = data.draw(st.sampled_from(sorted(v4_spellings(addr))))
    trick = data.draw(st.sampled_from(sorted(TRICKS)))
    with pytest.raises(BlockedURL, match="private or reserved"):
        await resolve_checked(TRICKS[trick](v4_spellings(addr)[spelling]))


@settings(max_examples=300, deadline=None)
@given(row=st.sampled_from(FORBIDDEN_V6), offset=st.integers(min_value=0), trick=st.sampled_from(sorted(TRICKS)))
async def test_any_address_of_a_forbidden_ipv6_block_is_refused(row: Forbidden, offset: int, trick: str) -> None:
    addr = row.network[offset % row.network.num_addresses]
    with pytest.raises(BlockedURL, match="private or reserved"):
        await resolve_checked(TRICKS[trick](f"[{addr}]"))


def _public_v4(n: int) -> bool:
    return forbidden_reason(V4(n)) is None


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 2**32 - 1).filter(_public_v4))
async def test_public_addresses_pass_in_every_spelling_embedded_ones_included(n: int) -> None:
    addr = V4(n)
    for spelling, host in v4_spellings(addr).items():
        assert await resolve_checked(f"http://{host}/") in (addr, *_embeddings(addr)), spelling


def _embeddings(addr: V4) -> list[V6]:
    n = int(addr)
    return [V6(f"::ffff:{addr}"), V6(f"::ffff:0:{addr}"), V6(f"::{addr}"), V6(f"64:ff9b::{addr}"),
            V6(f"2002:{(n >> 16):x}:{(n & 0xFFFF):x}::1")]


def test_embedded_ipv4_is_unwrapped_from_every_embedding_form() -> None:
    addr = V4("10.1.2.3")
    for wrapped in _embeddings(addr):
        assert embedded_ipv4(wrapped) == addr, wrapped
        assert "carries 10.1.2.3" in (forbidden_reason(wrapped) or "")


def test_public_ipv6_passes_and_unallocated_space_does_not() -> None:
    assert forbidden_reason(V6("2606:4700:4700::1111")) is None
    assert forbidden_reason(V6("2a00:1450:4001::200e")) is None
    assert forbidden_reason(V6("4000::1")) == "outside global unicast space (2000::/3)"


# --- the allow list still exempts what it names ---------------------------------------------


async def test_allow_list_exempts_networks_hosts_and_their_embedded_forms() -> None:
    assert str(await resolve_checked("http://192.0.0.192/", ["192.0.0.0/24"])) == "192.0.0.192"
    assert str(await resolve_checked("http://[::ffff:127.0.0.1]:9/", ["127.0.0.1"])) == "::ffff:7f00:1"
    assert str(await resolve_checked("http://localhost/", ["localhost"])) in ("127.0.0.1", "::1")
    with pytest.raises(BlockedURL, match="private or reserved"):
        await resolve_checked("http://[::ffff:127.0.0.2]/", ["127.0.0.1/32"])


# --- malformed URLs and international names -----------------------------------------------


def test_international_host_names_are_idna_encoded() -> None:
    assert parse_url("https://bücher.de/") == ("https", "xn--bcher-kva.de", None)
    assert parse_url("https://FUSSBALL.de:8443/") == ("https", "fussball.de", 8443)
    assert parse_url("https://faß.de/")[1] == "xn--fa-hia.de"  # IDNA 2008, as browsers: not fass.de


async def test_an_international_name_never_crashes_and_cannot_smuggle_a_local_host() -> None:
    with pytest.raises(BlockedURL, match="does not resolve"):
        await check_url("https://bücher.de/")  # no DNS here: refused with advice, not a UnicodeError
    for disguised in ("ｌｏｃａｌｈｏｓｔ", "ⓛⓞⓒⓐⓛⓗⓞⓢⓣ", "LOCALHOST"):
        with pytest.raises(BlockedURL, match="private or reserved"):
            await check_url(f"http://{disguised}/")


@pytest.mark.parametrize("url", [
    "http://[::1/", "http://[not-v6]/", "http://exa mple.com/", "http://a\tb/", "http://x_y!.com/",
    "http://127.0.0.1:99999/", "http://host:port/", "http:127.0.0.1/", "http:///x", "https://:80/",
    "http://evil.com＠127.0.0.1/", "http://" + "a" * 300 + ".com/", "http://xn--a.com/", "http://☃.net:/",
    "javascript:alert(1)", "", "   ", "//example.com/",
])
async def test_malformed_urls_are_refused_with_advice(url: str) -> None:
    with pytest.raises(BlockedURL) as caught:
        await check_url(url)
    message = str(caught.value)
    assert any(word in message for word in ("check", "pass a full URL", "only http")), message


@settings(max_examples=500, deadline=None)
@given(rest=st.text(max_size=40))
def test_any_text_after_the_scheme_parses_to_an_ascii_host_or_is_refused(rest: str) -> None:
    try:
        scheme, host, port = parse_url("http://" + rest)
    except BlockedURL:
        return
    assert scheme == "http" and host.isascii() and " " not in host
    assert port is None or 0 <= port <= 65535


# --- through the real fetch path, against a local server ------------------------------------

ONLY_LOOPBACK_ONE = FetchConfig(allow=["127.0.0.1/32"])


@pytest.mark.parametrize("location", [
    "http:127.0.0.1/", "http://[::1/", "http://a b/", "http://127.0.0.1:99999/", "http://exa\tmple.com/",
    "//[zz]/", "http://x:80:80/", "http://\u00a0/", "https://bücher.de/",
])
async def test_a_redirect_to_a_malformed_location_becomes_a_fetch_error(fake_web: FakeWeb, location: str) -> None:
    async with httpx.AsyncClient() as http:
        with pytest.raises(FetchError) as caught:
            await fetch(http, f"{fake_web.url}/redirect-to?url={quote(location)}", ONLY_LOOPBACK_ONE)
    assert "try another source" in str(caught.value) or "search for the page" in str(caught.value)


@pytest.mark.parametrize(("label", "host"), [
    (f"{network} {spelling}", host)
    for network, addr in (("192.0.0.0/24", "192.0.0.192"), ("169.254.0.0/16", "169.254.169.254"),
                          ("10.0.0.0/8", "10.0.0.1"), ("127.0.0.0/8", "127.0.0.2"))
    for spelling, host in v4_spellings(V4(addr)).items()
])
async def test_a_redirect_to_a_forbidden_address_in_any_spelling_is_refused_at_the_hop(
    fake_web: FakeWeb, label: str, host: str
) -> None:
    # httpx itself rejects some spellings in a Location header (0177.00.00.02, full-width
    # digits) before the guard sees them: refused as malformed, which is as safe.
    async with httpx.AsyncClient() as http:
        with pytest.raises(FetchError, match="private or reserved|redirected to a malformed address"):
            await fetch(http, f"{fake_web.url}/redirect-to?url={quote('http://' + host + '/latest/')}", ONLY_LOOPBACK_ONE)


async def test_an_international_host_name_reaches_the_server_with_its_ascii_name(fake_web: FakeWeb) -> None:
    port = fake_web.url.rsplit(":", 1)[1]
    async with httpx.AsyncClient() as http:
        page = await fetch(http, f"http://ｌｏｃａｌｈｏｓｔ:{port}/pages/etf-fees.html", FetchConfig(allow=["localhost"]))
    assert page.status == 200 and b"<html" in page.body.lower()


def test_spelling_generator_covers_every_block_of_both_tables() -> None:
    labels = {label.split()[0] for label, _ in forbidden_urls()}
    assert labels == {str(row.network) for row in itertools.chain(FORBIDDEN_V4, FORBIDDEN_V6)}


async def test_an_embedded_ipv4_literal_is_fetched_when_the_allow_list_names_its_ipv4(fake_web: FakeWeb) -> None:
    # ::ffff:127.0.0.1 reaches the fake server (on 127.0.0.1) through the IPv6 socket API.
    port = fake_web.url.rsplit(":", 1)[1]
    async with httpx.AsyncClient() as http:
        page = await fetch(http, f"http://[::ffff:127.0.0.1]:{port}/pages/etf-fees.html", FetchConfig(allow=["127.0.0.1"]))
    assert page.status == 200 and page.url.startswith("http://[::ffff:127.0.0.1]:")
