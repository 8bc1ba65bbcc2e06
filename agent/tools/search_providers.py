"""Search providers behind one interface: a query in, normalised results out."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx
from lxml import html as lxml_html

from ..config import SearchConfig
from .. import defaults


@dataclass
class SearchHit:
    title: str
    url: str
    snippet: str
    date: str | None = None


class SearchFailed(Exception):
    """The provider could not answer; the message tells the model what to try."""


def _status_error(provider: str, response: httpx.Response) -> SearchFailed:
    code = response.status_code
    if code == 429:
        wait = response.headers.get("retry-after")
        hint = f" (it asks to wait {wait} s)" if wait else ""
        return SearchFailed(f"{provider} is rate-limiting searches{hint}; read pages you already have, then search again")
    if code in (401, 403):
        return SearchFailed(f"{provider} rejected our credentials (HTTP {code}); the operator must fix the search key")
    return SearchFailed(f"{provider} failed with HTTP {code}; try again with a shorter query")


async def _get(client: httpx.AsyncClient, provider: str, url: str, **kwargs: object) -> httpx.Response:
    try:
        response = await client.get(url, **kwargs)  # type: ignore[arg-type]
    except httpx.TimeoutException:
        raise SearchFailed(f"{provider} did not answer in time; try again with a shorter query") from None
    except httpx.HTTPError as exc:
        raise SearchFailed(f"{provider} could not be reached ({type(exc).__name__})") from None
    if response.status_code >= 400:
        raise _status_error(provider, response)
    return response


async def searxng(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    if not config.searxng_url:
        raise SearchFailed("SearXNG is selected but SEARXNG_URL is not set; the operator must set it")
    url = config.searxng_url.rstrip("/") + "/search"
    response = await _get(client, "SearXNG", url, params={"q": query, "format": "json"})
    try:
        results = response.json().get("results", [])
    except ValueError:
        raise SearchFailed("SearXNG answered with something other than JSON; is its JSON format enabled?") from None
    return [
        SearchHit(title=r.get("title") or r.get("url", ""), url=r["url"], snippet=r.get("content") or "",
                  date=r.get("publishedDate"))
        for r in results if r.get("url")
    ]


def _ddg_target(href: str) -> str:
    # Result links go through a redirector: //duckduckgo.com/l/?uddg=<target>
    if "uddg=" in href:
        values = parse_qs(urlsplit(href).query).get("uddg")
        if values:
            return values[0]
    return href


async def duckduckgo(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    response = await _get(client, "DuckDuckGo", config.duckduckgo_url, params={"q": query})
    tree = lxml_html.fromstring(response.content or b"<html/>")
    hits: list[SearchHit] = []
    for result in tree.xpath('//div[contains(concat(" ", normalize-space(@class), " "), " result ")]'):
        links = result.xpath('.//a[contains(@class, "result__a")]')
        if not links:
            continue
        snippet = result.xpath('.//*[contains(@class, "result__snippet")]')
        url = _ddg_target(links[0].get("href", ""))
        if not url.startswith("http"):
            continue  # ads and internal links
        hits.append(SearchHit(
            title=" ".join(links[0].text_content().split()),
            url=url,
            snippet=" ".join(snippet[0].text_content().split()) if snippet else "",
        ))
    return hits


async def search(client: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    if config.provider == "searxng":
        hits = await searxng(client, config, query)
    elif config.provider == "duckduckgo":
        hits = await duckduckgo(client, config, query)
    else:
        raise SearchFailed(
            f"the {config.provider} provider is not available in this version; "
            "the operator can set DEEPTHREAD_SEARCH=duckduckgo or searxng"
        )
    return hits[: config.results or defaults.SEARCH_RESULTS]
