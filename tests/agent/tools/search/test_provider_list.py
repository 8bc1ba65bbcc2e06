"""The search providers are listed once: configuration, the chain, operator advice and doctor agree."""
from __future__ import annotations

from typing import get_args

from agent.config import SearchProvider
from agent.tools.search import operator_advice, providers
from agent.tools.search.chain import OPERATOR_PROVIDERS
from bot.settings import SEARCH_PROVIDERS


def test_every_configurable_provider_is_in_the_chain_and_nothing_else() -> None:
    assert set(providers()) == set(get_args(SearchProvider)) == set(SEARCH_PROVIDERS)


def test_operator_advice_names_each_missing_provider_with_what_to_set() -> None:
    advice = operator_advice(["duckduckgo"])
    for provider in OPERATOR_PROVIDERS.values():
        assert f"{provider.label} ({provider.setting})" in advice
    assert "Brave" not in operator_advice(["duckduckgo", "brave"]), "a provider already in the chain is not suggested"
