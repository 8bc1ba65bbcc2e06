"""Search that survives the real web: ddgs faked at the library seam, bot-check pages from the
fake web server, the fallback chain, and the once-per-run notice a human sees."""
from __future__ import annotations

import re
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from agent import AgentConfig, RunEvent, SearchConfig, SourceRegistry
from agent.config import DDGS_BACKEND
from agent.events import SearchDegraded
from agent.tools.base import ToolContext, ToolResult
from agent.tools.search import SearchAnswer, providers, search
from agent.tools.web_search import WebSearch, WebSearchInput
from bot.cli.doctor import search_problems
from bot.cli.doctor_live import live_search_problems
from bot.settings import Settings
from tests.fakes.web import BRAVE_KEY, FakeWeb

WRONG_BRAVE_KEY = "BSA-wrong-key-never-shown-4321"
# Results in the shape ddgs.DDGS.text() returns them.
DDGS_RESULTS = [
    {"title": "VTI &amp; VOO: <b>fees</b> compared", "href": "https://funds.example.com/vti",
     "body": "Vanguard Total Stock Market ETF (VTI) charges 0.03% a year."},
    {"title": "VTI again", "href": "https://funds.example.com/vti", "body": "the same page twice"},
    {"title": "Not a web page", "href": "javascript:void(0)", "body": "skipped"},
    {"title": "", "href": "https://etf.example.org/vti-fees", "body": "Expense ratio 0.03% as of 2024-04-29."},
]


class Script:
    """What the fake ddgs does, and what it was asked: a DDGS stand-in class is made per test."""

    def __init__(self, outcome: list[dict[str, str]] | BaseException | Callable[[], list[dict[str, str]]]) -> None:
        self.outcome = outcome
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.timeouts: list[int | None] = []
        self.log: list[str] | None = None  # shared with the fake web's requests to check the order

    def ddgs(self) -> type:
        script = self

        class FakeDDGS:
            """ddgs.DDGS's constructor and text() signature; answers from the script."""

            def __init__(self, proxy: str | None = None, timeout: int | None = 5, *, verify: bool | str = True) -> None:
                script.timeouts.append(timeout)

            def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
                script.calls.append((query, kwargs))
                if isinstance(script.outcome, BaseException):
                    raise script.outcome
                if callable(script.outcome):
                    return script.outcome()
                return list(script.outcome)

        return FakeDDGS


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def brave_url(web: FakeWeb) -> str:
    return web.url + "/brave/res/v1/web/search"  # type: ignore[attr-defined]


def chain(web: FakeWeb | None, names: str, **overrides: Any) -> SearchConfig:
    fields: dict[str, Any] = {"providers": names, "brave_api_key": BRAVE_KEY}
    if web is not None:
        fields |= {"brave_url": brave_url(web), "searxng_url": web.url,  # type: ignore[attr-defined]
                   "tavily_url": web.url + "/tavily/search"}  # type: ignore[attr-defined]
    return SearchConfig(**(fields | overrides))


class Run:
    """One run's view of web_search: the tool, its context, and the events a human would see."""

    def __init__(self, http: httpx.AsyncClient, config: SearchConfig, script: Script) -> None:
        self.events: list[RunEvent] = []

        async def emit(event: RunEvent) -> None:
            self.events.append(event)

        self.ctx = ToolContext(config=AgentConfig(search=config), registry=SourceRegistry(), http=http,
                               model=None, emit=emit, goal_question="")  # type: ignore[arg-type]
        self.tool = WebSearch(ddgs=script.ddgs())

    async def search(self, query: str, tool: WebSearch | None = None) -> ToolResult:
        return await (tool or self.tool).run(WebSearchInput(query=query), self.ctx)

    @property
    def notices(self) -> list[str]:
        return [e.text for e in self.events if isinstance(e, SearchDegraded)]


def brave_requests(web: FakeWeb) -> int:
    return sum(1 for _, path in web.requests if path.startswith("/brave/"))


# ------------------------------------------------------------ ddgs, the keyless default


async def test_ddgs_results_become_plain_hits_and_the_answer_names_duckduckgo(http: httpx.AsyncClient) -> None:
    script = Script(DDGS_RESULTS)

    answer = await search(http, SearchConfig(), "VTI expense ratio", registry=providers(script.ddgs()))

    assert answer.provider == "duckduckgo" and answer.label == "DuckDuckGo" and not answer.failures
    assert [h.url for h in answer.hits] == ["https://funds.example.com/vti", "https://etf.example.org/vti-fees"]
    assert answer.hits[0].title == "VTI & VOO: fees compared"
    assert answer.hits[1].title == "https://etf.example.org/vti-fees"  # no title: the URL stands in
    # Asked the way we configured it, with ddgs's own timeout a fraction of ours (15 s → 5 s per round).
    [(query, kwargs)] = script.calls
    assert query == "VTI expense ratio" and kwargs == {"max_results": 8, "backend": DDGS_BACKEND}
    assert script.timeouts == [5]


async def test_web_search_says_which_provider_answered(http: httpx.AsyncClient) -> None:
    run = Run(http, SearchConfig(), Script(DDGS_RESULTS))

    result = await run.search("VTI expense ratio")

    assert not result.is_error
    assert result.text.startswith('2 results for "VTI expense ratio" from DuckDuckGo:')
    assert "[s1] Vanguard Total Stock Market ETF (VTI) charges 0.03% a year." in result.text
    assert run.notices == []


async def test_a_ddgs_rate_limit_is_reported_as_one_not_as_no_results(http: httpx.AsyncClient) -> None:
    run = Run(http, SearchConfig(), Script(RatelimitException("https://html.duckduckgo.com/html 202 Ratelimit")))

    result = await run.search("VTI expense ratio")

    assert result.is_error and "No results" not in result.text
    assert result.text.startswith("Search failed: DuckDuckGo is rate-limiting searches from this server")
    assert "Do not rephrase the query: read pages you already have" in result.text
    assert "Brave (BRAVE_API_KEY), SearXNG (SEARXNG_URL), Tavily (TAVILY_API_KEY) or Anthropic web search" in result.text
    assert run.notices == [(
        "Search degraded: DuckDuckGo is rate-limiting searches. The operator can add Brave (BRAVE_API_KEY), "
        "SearXNG (SEARXNG_URL), Tavily (TAVILY_API_KEY) or Anthropic web search (anthropic: the model key alone, billed per search) to DEEPTHREAD_SEARCH, e.g. "
        "DEEPTHREAD_SEARCH=brave,duckduckgo.")]


@pytest.mark.parametrize(("error", "kind", "said"), [
    (TimeoutException("operation timed out"), "timeout", "DuckDuckGo did not answer within 15 s"),
    (DDGSException("RuntimeError: Ratelimit 429"), "rate_limited", "rate-limiting searches from this server"),
    (DDGSException("https://html.duckduckgo.com/html/ return 202 (anomaly)"), "blocked", "blocking automated"),
    (DDGSException("ConnectError: dns error"), "unavailable", "DuckDuckGo search failed (ConnectError: dns error)"),
])
async def test_each_ddgs_failure_has_its_kind_and_advice(http: httpx.AsyncClient, error: Exception, kind: str,
                                                         said: str) -> None:
    answer = await search(http, SearchConfig(), "VTI", registry=providers(Script(error).ddgs()))

    assert not answer.answered
    [failure] = answer.failures
    assert failure.provider == "duckduckgo" and failure.kind == kind and said in failure.message
    assert any(advice in failure.message for advice in ("try again", "read pages", "rephrasing will not help"))


async def test_ddgs_that_hangs_is_abandoned_at_our_own_deadline(http: httpx.AsyncClient) -> None:
    release = threading.Event()

    def hang() -> list[dict[str, str]]:
        release.wait(10)  # a ddgs stuck in its thread; our deadline must not wait for it
        return DDGS_RESULTS

    try:
        answer = await search(http, SearchConfig(timeout_seconds=0.2), "VTI", registry=providers(Script(hang).ddgs()))
    finally:
        release.set()
    [failure] = answer.failures
    assert failure.kind == "timeout" and failure.message.startswith("DuckDuckGo did not answer within 0.2 s")


@pytest.mark.parametrize("empty", [[], DDGSException("No results found.")], ids=["returns []", "raises no results"])
async def test_an_empty_ddgs_answer_is_not_called_no_results(http: httpx.AsyncClient, empty: Any) -> None:
    # ddgs says "No results found." both when nothing matched and when every backend refused.
    run = Run(http, SearchConfig(), Script(empty))

    result = await run.search("VTI expense ratio")

    assert not result.is_error and "No results for" not in result.text
    assert result.text.startswith('DuckDuckGo returned nothing for "VTI expense ratio". It reports "no matches" and '
                                  '"refused" alike, so this may be a block')
    assert "the operator can add Brave (BRAVE_API_KEY)" in result.text
    assert run.notices == []  # once can be a genuinely empty query

    await run.search("Vanguard fund fees")
    await run.search("ETF expense ratios")

    [notice] = run.notices  # twice in a row is worth a human's eye, and said once
    assert notice.startswith("Search may be degraded: DuckDuckGo returned nothing for 2 searches in a row")


# ------------------------------------------------- bot-check pages from hand-written providers


@pytest.mark.parametrize("provider", ["searxng", "brave", "tavily"])
async def test_a_challenge_page_is_a_block_not_an_empty_result(fake_web: FakeWeb, http: httpx.AsyncClient,
                                                               provider: str) -> None:
    fake_web.search_challenge_next()
    config = chain(fake_web, provider, tavily_api_key="tvly-fake-0123456789abcdef")

    answer = await search(http, config, "VTI expense ratio")

    assert not answer.answered
    [failure] = answer.failures
    assert failure.kind == "blocked"
    assert "a bot-check page (HTTP 202) instead of results" in failure.message
    assert "rephrasing will not help" in failure.message


async def test_web_search_shows_a_challenge_page_to_the_model_and_once_to_a_human(fake_web: FakeWeb,
                                                                                http: httpx.AsyncClient) -> None:
    fake_web.search_challenge_next(times=2)
    run = Run(http, chain(fake_web, "searxng"), Script([]))

    first = await run.search("VTI expense ratio")
    await run.search("ITOT tracking difference")

    assert first.is_error and "No results" not in first.text
    assert first.text.startswith("Search failed: SearXNG answered with a bot-check page (HTTP 202)")
    assert "Do not rephrase the query" in first.text and "Brave (BRAVE_API_KEY), Tavily" in first.text
    assert run.notices == [(
        "Search degraded: SearXNG is blocking automated searches (bot-check page). The operator "
        "can add Brave (BRAVE_API_KEY), Tavily (TAVILY_API_KEY) or Anthropic web search (anthropic: the model key alone, billed per search) to DEEPTHREAD_SEARCH, e.g. "
        "DEEPTHREAD_SEARCH=brave,searxng.")]


async def test_searxng_whose_engines_all_refused_is_blocked_not_empty(fake_web: FakeWeb,
                                                                      http: httpx.AsyncClient) -> None:
    fake_web.searxng_unresponsive = [("duckduckgo", "CAPTCHA"), ("google", "too many requests")]

    answer = await search(http, chain(fake_web, "searxng"), "VTI expense ratio")

    [failure] = answer.failures
    assert failure.kind == "blocked"
    assert "SearXNG's engines did not answer (duckduckgo (CAPTCHA), google (too many requests))" in failure.message


async def test_searxng_results_go_through_the_shared_normaliser(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    fake_web.add_result("https://fees.example.com/schb", "SCHB &amp; ITOT: <b>fees</b>",
                        "SCHB &amp; ITOT charge 0.03% a year", match="schb")
    fake_web.add_result("javascript:alert(1)", "not a page", "skipped", match="schb")

    answer = await search(http, chain(fake_web, "searxng"), "SCHB fees")

    assert answer.provider == "searxng"
    hit = answer.hits[0]
    assert (hit.url, hit.title, hit.snippet) == ("https://fees.example.com/schb", "SCHB & ITOT: fees",
                                                 "SCHB & ITOT charge 0.03% a year")
    assert all(h.url.startswith("http") for h in answer.hits)


# -------------------------------------------------------------------- the fallback chain


async def test_the_first_provider_that_answers_is_the_only_one_asked(fake_web: FakeWeb,
                                                                      http: httpx.AsyncClient) -> None:
    script = Script(DDGS_RESULTS)
    registry = providers(script.ddgs())

    answer = await search(http, chain(fake_web, "brave,duckduckgo"), "VTI expense ratio", registry=registry)
    assert answer.provider == "brave" and brave_requests(fake_web) == 1 and script.calls == []

    answer = await search(http, chain(fake_web, "duckduckgo,brave"), "VTI expense ratio", registry=registry)
    assert answer.provider == "duckduckgo" and brave_requests(fake_web) == 1 and len(script.calls) == 1


async def test_a_rate_limited_provider_hands_over_to_the_next_in_order(fake_web: FakeWeb,
                                                                       http: httpx.AsyncClient) -> None:
    fake_web.search_fail_next(429, retry_after=60)
    run = Run(http, chain(fake_web, "brave,duckduckgo"), Script(DDGS_RESULTS))

    result = await run.search("VTI expense ratio")

    assert not result.is_error and brave_requests(fake_web) == 1
    assert result.text.startswith('2 results for "VTI expense ratio" from DuckDuckGo:')
    assert result.text.endswith("(Brave could not answer: Brave is rate-limiting searches and asks us to wait 60 s; "
                                "read pages you already have, then search again. DuckDuckGo answered instead.)")
    assert run.notices == [(
        "Search degraded: Brave is rate-limiting searches; DuckDuckGo answered instead. The "
        "operator can add SearXNG (SEARXNG_URL), Tavily (TAVILY_API_KEY) or Anthropic web search (anthropic: the model key alone, billed per search) to DEEPTHREAD_SEARCH, e.g. "
        "DEEPTHREAD_SEARCH=searxng,brave,duckduckgo.")]


async def test_a_blocked_keyless_provider_hands_over_to_a_keyed_one(fake_web: FakeWeb,
                                                                    http: httpx.AsyncClient) -> None:
    run = Run(http, chain(fake_web, "duckduckgo,brave"), Script(RatelimitException("202 Ratelimit")))

    result = await run.search("VTI expense ratio")

    assert not result.is_error
    assert re.fullmatch(r'\d+ results for "VTI expense ratio" from Brave:', result.text.splitlines()[0])
    assert "(DuckDuckGo could not answer: DuckDuckGo is rate-limiting" in result.text


async def test_a_bad_key_hands_over_and_is_not_asked_again_this_run(fake_web: FakeWeb,
                                                                    http: httpx.AsyncClient) -> None:
    script = Script(DDGS_RESULTS)
    run = Run(http, chain(fake_web, "brave,duckduckgo", brave_api_key=WRONG_BRAVE_KEY), script)

    first = await run.search("VTI expense ratio")
    second = await run.search("ITOT fees")

    assert "from DuckDuckGo" in first.text and "Brave rejected the API key" in first.text
    assert WRONG_BRAVE_KEY not in first.text
    assert brave_requests(fake_web) == 1 and len(script.calls) == 2  # the dead key is not paid for twice
    assert "Brave" not in second.text.splitlines()[0] and "could not answer" not in second.text
    assert len(run.notices) == 1 and run.notices[0].startswith("Search degraded: Brave cannot be used as configured")


async def test_when_every_provider_fails_each_failure_is_told(fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    fake_web.search_challenge_next()
    run = Run(http, chain(fake_web, "brave,duckduckgo"), Script(RatelimitException("202 Ratelimit")))

    result = await run.search("VTI expense ratio")

    assert result.is_error
    assert result.text.startswith("Search failed: no configured provider answered. Brave: Brave answered with a "
                                  "bot-check page (HTTP 202)")
    assert "DuckDuckGo: DuckDuckGo is rate-limiting searches" in result.text
    assert "Do not rephrase the query" in result.text
    assert len(run.notices) == 2  # two conditions, one notice each


async def test_a_condition_is_announced_once_per_run_across_task_agents(http: httpx.AsyncClient) -> None:
    run = Run(http, SearchConfig(), Script(RatelimitException("202 Ratelimit")))
    task_agent_copy = run.tool.fresh()

    await run.search("VTI expense ratio")
    await run.search("VTI expense ratio", tool=task_agent_copy)  # a sibling may search what the lead did
    await run.search("ITOT fees", tool=task_agent_copy)

    assert len(run.notices) == 1


async def test_a_resumed_run_remembers_what_was_announced_and_searched(http: httpx.AsyncClient) -> None:
    first = Run(http, SearchConfig(), Script(DDGS_RESULTS))
    await first.search("VTI expense ratio")
    limited = Run(http, SearchConfig(), Script(RatelimitException("202 Ratelimit")))
    limited.tool.restore(first.tool.snapshot())
    await limited.search("ITOT fees")
    saved = limited.tool.snapshot()

    resumed = Run(http, SearchConfig(), Script(RatelimitException("202 Ratelimit")))
    resumed.tool.restore(saved)
    again = await resumed.search("VTI expense ratio")
    await resumed.search("SCHB fees")

    assert again.is_error and again.text.startswith('You already searched for "VTI expense ratio"')
    assert len(limited.notices) == 1 and resumed.notices == []


async def test_a_query_that_got_no_answer_may_be_asked_again(http: httpx.AsyncClient) -> None:
    script = Script(RatelimitException("202 Ratelimit"))
    run = Run(http, SearchConfig(), script)
    await run.search("VTI expense ratio")
    script.outcome = DDGS_RESULTS  # the rate limit has passed

    result = await run.search("VTI expense ratio")

    assert not result.is_error and result.text.startswith('2 results for "VTI expense ratio" from DuckDuckGo:')


def test_a_checkpoint_from_before_the_chain_still_restores() -> None:
    tool = WebSearch(ddgs=Script([]).ddgs())
    tool.restore({"vti expense ratio": 1})
    assert tool.snapshot()["seen"] == {"vti expense ratio": 1}


# ------------------------------------------------------------------ configuration


def test_deepthread_search_takes_an_ordered_list() -> None:
    config = Settings(search=" Brave, duckduckgo ,brave", brave_api_key=SecretStr("k-1")).agent_config().search
    assert config.providers == ["brave", "duckduckgo"]
    assert Settings().agent_config().search.providers == ["duckduckgo"]
    assert Settings(search="bing").agent_config().search.providers == ["duckduckgo"]  # doctor names the mistake


def test_doctor_names_every_provider_in_the_chain_that_cannot_work() -> None:
    problems = search_problems(Settings(search="brave,bing,searxng,duckduckgo", brave_api_key=None))
    assert len(problems) == 3
    chain = "DEEPTHREAD_SEARCH=brave,bing,searxng,duckduckgo"
    assert problems[0].startswith(f"BRAVE_API_KEY is not set: {chain}: brave needs it")
    assert problems[0].endswith("or remove it from the list")
    assert problems[1].startswith(f"{chain}: bing is not a known provider")
    assert problems[2].startswith(f"{chain}: searxng needs SEARXNG_URL")
    assert search_problems(Settings(search="brave,duckduckgo", brave_api_key=SecretStr("k-1"))) == []
    [empty] = search_problems(Settings(search=" , "))
    assert empty.startswith("DEEPTHREAD_SEARCH is empty")
    assert search_problems(Settings(search="")) == [], "a blank setting is unset: the default, duckduckgo"


NAMES = st.sampled_from(["duckduckgo", "searxng", "brave", "tavily", "Brave", " tavily "])


@given(st.lists(NAMES, min_size=1, max_size=8))
def test_any_list_of_names_becomes_each_provider_once_in_first_named_order(names: list[str]) -> None:
    config = SearchConfig.model_validate({"providers": ",".join(names)})
    expected = list(dict.fromkeys(n.strip().lower() for n in names))
    assert config.providers == expected
    assert SearchConfig.model_validate(config.model_dump()).providers == expected  # survives the job payload


def test_an_answer_without_provider_is_not_answered() -> None:
    assert not SearchAnswer(provider=None, label=None).answered


async def test_a_timeout_covered_by_the_next_provider_is_not_announced(fake_web: FakeWeb,
                                                                      http: httpx.AsyncClient) -> None:
    run = Run(http, chain(fake_web, "duckduckgo,brave"), Script(TimeoutException("operation timed out")))

    covered = await run.search("VTI expense ratio")
    assert "from Brave" in covered.text.splitlines()[0] and run.notices == []

    fake_web.search_fail_next(500)
    await run.search("ITOT fees")  # now nobody answers: the human hears about both

    assert [n.split(".")[0] for n in run.notices] == [
        "Search degraded: DuckDuckGo is not answering in time",
        "Search degraded: Brave is failing (server errors or unreachable)"]


async def test_the_live_check_names_each_provider_that_failed_a_real_search(fake_web: FakeWeb) -> None:
    settings = Settings(search="brave,duckduckgo", brave_api_key=SecretStr(WRONG_BRAVE_KEY),
                        brave_url=brave_url(fake_web))

    [problem] = await live_search_problems(settings, ddgs=Script(DDGS_RESULTS).ddgs())

    assert problem.startswith("DEEPTHREAD_SEARCH=brave,duckduckgo: Brave cannot be used as configured (Brave "
                              "rejected the API key")
    assert problem.endswith("; DuckDuckGo answered the test search instead"), problem
    assert WRONG_BRAVE_KEY not in problem
    assert await live_search_problems(Settings(), ddgs=Script(DDGS_RESULTS).ddgs()) == []
    [empty] = await live_search_problems(Settings(), ddgs=Script([]).ddgs())
    assert "DuckDuckGo returned nothing for the test search" in empty


def test_the_fake_web_gives_a_bot_check_the_way_duckduckgo_does(fake_web: FakeWeb) -> None:
    fake_web.search_challenge_next()
    url = fake_web.url + "/html/"  # type: ignore[attr-defined]

    checked = httpx.post(url, data={"q": "tracking error"})
    after = httpx.post(url, data={"q": "tracking error"})

    assert checked.status_code == 202 and checked.headers["content-type"].startswith("text/html")
    assert "anomaly.js" in checked.text and 'id="challenge-form"' in checked.text and "result__a" not in checked.text
    assert after.status_code == 200 and "result__a" in after.text
