"""The hand-written search providers (Brave, Tavily, SearXNG), through the real httpx client against
FakeWeb's real wire formats."""
from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agent import AgentConfig, RunEvent, SearchConfig, SourceRegistry
from agent.tools.base import ToolContext
from agent.tools.search import SearchHit, search
from agent.tools.web_search import WebSearch, WebSearchInput
from bot.cli.doctor import search_problems
from bot.settings import Settings
from tests.fakes.server import free_port
from tests.fakes.web import BRAVE_KEY, TAVILY_KEY, FakeWeb, Page

WRONG_BRAVE_KEY = "BSA-wrong-key-never-shown-1234"
WRONG_TAVILY_KEY = "tvly-wrong-key-never-shown-5678"


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def brave_config(web: FakeWeb, **overrides: Any) -> SearchConfig:
    fields: dict[str, Any] = {"provider": "brave", "brave_api_key": BRAVE_KEY,
                              "brave_url": web.url + "/brave/res/v1/web/search"}  # type: ignore[attr-defined]
    return SearchConfig(**(fields | overrides))


def tavily_config(web: FakeWeb, **overrides: Any) -> SearchConfig:
    fields: dict[str, Any] = {"provider": "tavily", "tavily_api_key": TAVILY_KEY,
                              "tavily_url": web.url + "/tavily/search"}  # type: ignore[attr-defined]
    return SearchConfig(**(fields | overrides))


def searxng_config(web: FakeWeb) -> SearchConfig:
    return SearchConfig(provider="searxng", searxng_url=web.url)  # type: ignore[attr-defined]


CONFIGS = {"brave": brave_config, "tavily": tavily_config, "searxng": searxng_config}


def requests_to(web: FakeWeb, prefix: str) -> list[str]:
    return [path for _, path in web.requests if path.startswith(prefix)]


async def hits_of(http: httpx.AsyncClient, config: SearchConfig, query: str) -> list[SearchHit]:
    answer = await search(http, config, query)
    assert answer.provider == config.providers[0], answer.failures
    return answer.hits


async def failure(http: httpx.AsyncClient, config: SearchConfig, query: str = "VTI expense ratio") -> str:
    """The one provider's failure message (the chain has a single provider here)."""
    answer = await search(http, config, query)
    assert not answer.answered and len(answer.failures) == 1, answer
    return answer.failures[0].message


# ------------------------------------------------------------------ Brave


async def test_brave_returns_plain_text_hits_for_a_query(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    hits = await hits_of(http, brave_config(fake_web), "VTI expense ratio")

    assert hits[0].url == fake_web.url + "/pages/etf-fees.html"  # type: ignore[attr-defined]
    assert hits[0].title.startswith("What Total-Market Index Funds Really Cost")
    assert "(VTI)" in hits[0].snippet and "S&P Total" in hits[0].snippet  # the fake sent "S&amp;P"
    assert all("<" not in h.snippet and "&amp;" not in h.snippet for h in hits)
    assert all("ocean" not in h.url for h in hits)
    # The request is the documented one: count (≤ 20) as a parameter, the key in a header only.
    [path] = requests_to(fake_web, "/brave/")
    assert "count=8" in path and BRAVE_KEY not in path


async def test_brave_snippet_markup_is_removed_and_entities_unescaped(fake_web: FakeWeb,
                                                                      http: httpx.AsyncClient) -> None:
    fake_web.add_result("https://fees.example.com/schb", "SCHB & ITOT: fees <compared>",
                        "SCHB & ITOT charge 0.03% a year <as of 2024>", match="schb", published="2024-03-12")
    raw = httpx.get(fake_web.url + "/brave/res/v1/web/search", params={"q": "SCHB fees"},  # type: ignore[attr-defined]
                    headers={"X-Subscription-Token": BRAVE_KEY}).json()
    assert raw["web"]["results"][0]["description"].startswith("<strong>SCHB</strong> &amp; ITOT")

    [hit, *_] = await hits_of(http, brave_config(fake_web), "SCHB fees")

    assert hit.url == "https://fees.example.com/schb"
    assert hit.title == "SCHB & ITOT: fees <compared>"
    assert hit.snippet == "SCHB & ITOT charge 0.03% a year <as of 2024>"
    assert hit.date == "2024-03-12"


async def test_brave_with_no_matches_returns_no_hits(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    assert await hits_of(http, brave_config(fake_web), "zyzzyva quokka") == []


async def test_brave_bad_key_is_a_clear_failure_that_never_shows_the_key(fake_web: FakeWeb,
                                                                         http: httpx.AsyncClient) -> None:
    message = await failure(http, brave_config(fake_web, brave_api_key=WRONG_BRAVE_KEY))

    assert "Brave rejected the API key" in message and "SUBSCRIPTION_TOKEN_INVALID" in message
    assert "BRAVE_API_KEY" in message and "api-dashboard.search.brave.com" in message
    assert WRONG_BRAVE_KEY not in message and BRAVE_KEY not in message


async def test_brave_without_a_key_asks_the_operator_and_sends_nothing(fake_web: FakeWeb,
                                                                       http: httpx.AsyncClient) -> None:
    for key in (None, "", "   "):
        message = await failure(http, brave_config(fake_web, brave_api_key=key))
        assert "BRAVE_API_KEY is not set" in message and "operator must set BRAVE_API_KEY" in message
        assert "read_page" in message
    assert requests_to(fake_web, "/brave/") == []


async def test_a_key_with_a_line_break_is_refused_before_sending(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    message = await failure(http, brave_config(fake_web, brave_api_key="BSA-abc\ndef-secret"))
    assert "BRAVE_API_KEY contains spaces, line breaks or non-ASCII" in message and "def-secret" not in message
    message = await failure(http, tavily_config(fake_web, tavily_api_key="tvly-clé-secrète"))
    assert "TAVILY_API_KEY" in message and "secrète" not in message
    assert requests_to(fake_web, "/brave/") == requests_to(fake_web, "/tavily/") == []


async def test_brave_rate_limit_says_how_long_to_wait(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    fake_web.search_fail_next(429, retry_after=30)

    message = await failure(http, brave_config(fake_web))

    assert message == ("Brave is rate-limiting searches and asks us to wait 30 s; "
                       "read pages you already have, then search again")
    assert len(requests_to(fake_web, "/brave/")) == 1  # too long to wait out inside one tool call


async def test_a_per_second_brave_limit_is_waited_out_once(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    # No Retry-After: the pause comes from X-RateLimit-Remaining "0, …" / X-RateLimit-Reset "1, …".
    fake_web.search_fail_next(429)

    hits = await hits_of(http, brave_config(fake_web), "VTI expense ratio")

    assert hits and len(requests_to(fake_web, "/brave/")) == 2


async def test_a_used_up_brave_quota_says_the_operator_must_raise_it(fake_web: FakeWeb,
                                                                     http: httpx.AsyncClient) -> None:
    fake_web.search_fail_next(429, quota=True)

    message = await failure(http, brave_config(fake_web))

    assert "quota for this key is used up (it resets in 15 days)" in message
    assert "operator must raise the plan's limit" in message


async def test_brave_server_error_says_to_try_again_later(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    fake_web.search_fail_next(500)
    message = await failure(http, brave_config(fake_web))
    assert message == "Brave had a server error (HTTP 500); try again in a minute, or read pages you already have"


async def test_brave_that_does_not_answer_in_time_fails_within_the_deadline(fake_web: FakeWeb,
                                                                             http: httpx.AsyncClient) -> None:
    fake_web.search_stall_next(3.0)
    message = await failure(http, brave_config(fake_web, timeout_seconds=0.3))
    assert message == "Brave did not answer within 0.3 s; try again, or use a shorter query"


async def test_a_trickling_answer_is_cut_at_the_deadline(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    # /slow sends a few bytes at once, then nothing: a read timeout, not a connect one.
    message = await failure(http, brave_config(fake_web, brave_url=fake_web.url + "/slow",  # type: ignore[attr-defined]
                                               timeout_seconds=0.3))
    assert "did not answer within 0.3 s" in message


async def test_a_non_json_answer_is_a_clear_failure(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    config = brave_config(fake_web, brave_url=fake_web.url + "/pages/etf-fees.html")  # type: ignore[attr-defined]
    message = await failure(http, config)
    assert message.startswith("Brave answered with text/html, not JSON")
    assert "DEEPTHREAD_BRAVE_URL" in message


async def test_a_query_brave_cannot_take_is_refused_with_advice(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    message = await failure(http, brave_config(fake_web), " ".join(["fee"] * 60))
    assert "too long for Brave" in message and "60 words" in message and "2–6 plain words" in message
    assert requests_to(fake_web, "/brave/") == []


# ------------------------------------------------------------------ Tavily


async def test_tavily_returns_plain_text_hits_for_a_query(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    hits = await hits_of(http, tavily_config(fake_web), "tracking error")

    assert hits[0].url == fake_web.url + "/pages/tracking-error.html"  # type: ignore[attr-defined]
    assert hits[0].title.startswith("Tracking Error vs. Tracking Difference")
    assert "tracking" in hits[0].snippet.lower() and hits[0].date is None
    assert [("POST", "/tavily/search")] == [r for r in fake_web.requests if r[1].startswith("/tavily/")]


async def test_tavily_bad_key_is_a_clear_failure_that_never_shows_the_key(fake_web: FakeWeb,
                                                                          http: httpx.AsyncClient) -> None:
    message = await failure(http, tavily_config(fake_web, tavily_api_key=WRONG_TAVILY_KEY))

    assert message.startswith("Tavily rejected the API key (HTTP 401)")
    assert "TAVILY_API_KEY" in message and "app.tavily.com" in message
    assert WRONG_TAVILY_KEY not in message and TAVILY_KEY not in message


async def test_tavily_without_a_key_asks_the_operator_and_sends_nothing(fake_web: FakeWeb,
                                                                        http: httpx.AsyncClient) -> None:
    message = await failure(http, tavily_config(fake_web, tavily_api_key=None))
    assert "TAVILY_API_KEY is not set" in message and "operator must set TAVILY_API_KEY" in message
    assert requests_to(fake_web, "/tavily/") == []


async def test_tavily_rate_limit_says_how_long_to_wait(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    fake_web.search_fail_next(429, retry_after=45)
    message = await failure(http, tavily_config(fake_web))
    assert "Tavily is rate-limiting searches and asks us to wait 45 s" in message
    assert "read pages you already have" in message


@pytest.mark.parametrize(("status", "limit"), [(432, "plan's usage limit"), (433, "pay-as-you-go limit")])
async def test_tavily_plan_limits_say_the_operator_must_raise_them(fake_web: FakeWeb, http: httpx.AsyncClient,
                                                                   status: int, limit: str) -> None:
    fake_web.search_fail_next(status)
    message = await failure(http, tavily_config(fake_web))
    assert f"this key's {limit} is reached (HTTP {status})" in message
    assert "operator must raise it in the Tavily dashboard" in message


async def test_tavily_server_error_says_to_try_again_later(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    fake_web.search_fail_next(500)
    message = await failure(http, tavily_config(fake_web))
    assert message == "Tavily had a server error (HTTP 500); try again in a minute, or read pages you already have"


async def test_tavily_with_no_matches_returns_no_hits(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    assert await hits_of(http, tavily_config(fake_web), "zyzzyva quokka") == []


async def test_tavily_that_does_not_answer_in_time_fails_within_the_deadline(fake_web: FakeWeb,
                                                                              http: httpx.AsyncClient) -> None:
    fake_web.search_stall_next(3.0)
    message = await failure(http, tavily_config(fake_web, timeout_seconds=0.3))
    assert message == "Tavily did not answer within 0.3 s; try again, or use a shorter query"


# ------------------------------------------------------- every provider


@pytest.mark.parametrize("provider", sorted(CONFIGS))
@pytest.mark.parametrize("status", [400, 403, 404, 429, 500, 502, 503])
async def test_every_http_failure_is_a_search_failed_with_advice(fake_web: FakeWeb, http: httpx.AsyncClient,
                                                                 provider: str, status: int) -> None:
    fake_web.search_fail_next(status, times=2, retry_after=60)
    message = await failure(http, CONFIGS[provider](fake_web))
    assert f"HTTP {status}" in message or "wait 60 s" in message
    assert any(advice in message for advice in ("try", "use", "read pages", "operator"))


@pytest.mark.parametrize("provider", sorted(CONFIGS))
async def test_an_unreachable_provider_is_a_search_failed(http: httpx.AsyncClient, provider: str) -> None:
    closed = FakeWeb()
    closed.url = f"http://127.0.0.1:{free_port()}"  # type: ignore[attr-defined]
    message = await failure(http, CONFIGS[provider](closed))
    assert "could not be reached (ConnectError)" in message and "try again" in message


async def test_searxng_without_searxng_url_asks_the_operator_to_set_it(http: httpx.AsyncClient) -> None:
    message = await failure(http, SearchConfig(provider="searxng"))
    assert "SEARXNG_URL is not set" in message and "operator must set it" in message


async def test_searxng_returns_hits_for_a_query(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    hits = await hits_of(http, searxng_config(fake_web), "ITOT SCHB")
    assert hits and hits[0].url == fake_web.url + "/pages/etf-fees.html"  # type: ignore[attr-defined]


# ------------------------------------------------- through the web_search tool


def tool_context(http: httpx.AsyncClient, search_config: SearchConfig) -> ToolContext:
    async def emit(event: RunEvent) -> None:
        pass

    return ToolContext(config=AgentConfig(search=search_config), registry=SourceRegistry(), http=http,
                       model=None, emit=emit, goal_question="")  # type: ignore[arg-type]


@pytest.mark.parametrize("provider", ["brave", "tavily"])
async def test_web_search_results_carry_citation_markers(fake_web: FakeWeb, http: httpx.AsyncClient,
                                                         provider: str) -> None:
    ctx = tool_context(http, CONFIGS[provider](fake_web))

    result = await WebSearch().run(WebSearchInput(query="VTI expense ratio"), ctx)

    assert not result.is_error
    label = {"brave": "Brave", "tavily": "Tavily"}[provider]
    assert result.text.startswith(f'{len(ctx.registry)} results for "VTI expense ratio" from {label}:')
    first = ctx.registry.get("s1")
    assert first is not None and first.url == fake_web.url + "/pages/etf-fees.html"  # type: ignore[attr-defined]
    assert f"[s1] {first.passage}" in result.text and "<strong>" not in result.text


async def test_web_search_turns_a_provider_failure_into_an_actionable_error(fake_web: FakeWeb,
                                                                            http: httpx.AsyncClient) -> None:
    fake_web.search_fail_next(503)
    ctx = tool_context(http, brave_config(fake_web))

    result = await WebSearch().run(WebSearchInput(query="SCHB expense ratio"), ctx)

    assert result.is_error
    assert result.text == ("Search failed: Brave had a server error (HTTP 503); try again in a minute, "
                           "or read pages you already have.")
    assert len(ctx.registry) == 0


async def test_web_search_with_a_wrong_key_tells_the_model_what_to_do(fake_web: FakeWeb,
                                                                      http: httpx.AsyncClient) -> None:
    ctx = tool_context(http, tavily_config(fake_web, tavily_api_key=WRONG_TAVILY_KEY))

    result = await WebSearch().run(WebSearchInput(query="ITOT tracking difference"), ctx)

    assert result.is_error and "TAVILY_API_KEY" in result.text and "read pages you already have" in result.text
    assert WRONG_TAVILY_KEY not in result.text


async def test_web_search_with_no_results_suggests_broader_words(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    ctx = tool_context(http, brave_config(fake_web))
    result = await WebSearch().run(WebSearchInput(query="zyzzyva quokka"), ctx)
    assert not result.is_error
    assert result.text == 'No results for "zyzzyva quokka" from Brave. Try fewer or more general words, or synonyms.'


# --------------------------------------------- the fakes speak the real format


def test_fake_brave_answers_key_problems_like_brave(fake_web: FakeWeb) -> None:
    url = fake_web.url + "/brave/res/v1/web/search"  # type: ignore[attr-defined]
    missing = httpx.get(url, params={"q": "vti"})
    assert missing.status_code == 422 and missing.json()["error"]["code"] == "VALIDATION"
    assert missing.json()["error"]["meta"]["errors"][0]["loc"] == ["header", "x-subscription-token"]
    wrong = httpx.get(url, params={"q": "vti"}, headers={"X-Subscription-Token": "nope"})
    assert wrong.status_code == 422 and wrong.json()["type"] == "ErrorResponse"
    assert wrong.json()["error"]["code"] == "SUBSCRIPTION_TOKEN_INVALID"
    bad_count = httpx.get(url, params={"q": "vti", "count": "21"}, headers={"X-Subscription-Token": BRAVE_KEY})
    assert bad_count.status_code == 422 and bad_count.json()["error"]["code"] == "VALIDATION"

    ok = httpx.get(url, params={"q": "vti", "count": "1"}, headers={"X-Subscription-Token": BRAVE_KEY})
    assert ok.json()["type"] == "search" and len(ok.json()["web"]["results"]) == 1
    assert ok.headers["x-ratelimit-policy"] == "1;w=1, 2000;w=2592000"

    fake_web.search_fail_next(429)
    limited = httpx.get(url, params={"q": "vti"}, headers={"X-Subscription-Token": BRAVE_KEY})
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "RATE_LIMITED"
    assert limited.headers["x-ratelimit-remaining"].startswith("0, ") and "retry-after" not in limited.headers


def test_fake_tavily_answers_key_problems_like_tavily(fake_web: FakeWeb) -> None:
    url = fake_web.url + "/tavily/search"  # type: ignore[attr-defined]
    missing = httpx.post(url, json={"query": "vti"})
    assert missing.status_code == 401
    assert missing.json() == {"detail": {"error": "Unauthorized: missing or invalid API key."}}
    wrong = httpx.post(url, json={"query": "vti"}, headers={"Authorization": "Bearer tvly-nope"})
    assert wrong.status_code == 401
    legacy = httpx.post(url, json={"query": "vti", "api_key": TAVILY_KEY})  # older clients put the key in the body
    assert legacy.status_code == 200

    auth = {"Authorization": f"Bearer {TAVILY_KEY}"}
    too_many = httpx.post(url, json={"query": "vti", "max_results": 21}, headers=auth)
    assert too_many.status_code == 400 and "max_results" in too_many.json()["detail"]["error"]
    data = httpx.post(url, json={"query": "VTI expense ratio", "max_results": 2}, headers=auth).json()
    assert set(data) >= {"query", "results", "response_time"} and len(data["results"]) == 2
    assert data["results"][0]["score"] > data["results"][1]["score"]

    fake_web.add_page("/news/vti.html", Page("<title>VTI news</title><p>Quokka Funds cut fees.</p>",
                                             published="2024-03-12"))
    news = httpx.post(url, json={"query": "quokka", "topic": "news"}, headers=auth).json()
    assert news["results"][0]["published_date"] == "Tue, 12 Mar 2024 00:00:00 GMT"

    fake_web.search_fail_next(432)
    plan = httpx.post(url, json={"query": "vti"}, headers=auth)
    assert plan.status_code == 432 and "plan's set usage limit" in plan.json()["detail"]["error"]


# ------------------------------------------------------------------ doctor


@pytest.mark.parametrize(("provider", "env", "where"), [
    ("brave", "BRAVE_API_KEY", "https://api-dashboard.search.brave.com"),
    ("tavily", "TAVILY_API_KEY", "https://app.tavily.com"),
])
def test_doctor_names_a_missing_search_key_and_where_to_get_it(provider: str, env: str, where: str) -> None:
    field = env.lower()
    [problem] = search_problems(Settings(search=provider, **{field: None}))
    assert problem.startswith(f"{env} is not set: DEEPTHREAD_SEARCH={provider} needs it") and where in problem
    assert "\n" not in problem
    assert search_problems(Settings(search=provider, **{field: "k-123"})) == []


def test_doctor_lists_every_provider_for_an_unknown_one() -> None:
    [problem] = search_problems(Settings(search="bing"))
    assert all(name in problem for name in ("duckduckgo", "searxng", "brave", "tavily"))
