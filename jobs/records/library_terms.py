"""The words the team's library indexes a report under, and the forms a query word may take.

A word is a run of letters and digits, lower-cased; the common function words of every language the
bot detects (agent/language.py) are left out, and what is left is stemmed with the Snowball stemmer of
the report's language, so "fees" and "fee", "Gebühren" and "Gebühr" meet. A query is short and its
language is often unclear ("ETF Kosten"), so each query word is stemmed in every language the bot
knows and a report matches the word by whichever form it was indexed under (library.py scores the best).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

import snowballstemmer

from agent.language import LANGUAGES, detect

__all__ = ["STEMMERS", "bag", "detect_code", "query_words", "stem"]

# Letters and digits, any script: "VTI", "2024", "Gebühren", "東京".
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Longer "words" are hashes, URLs' innards or glued text: nobody searches for them.
MAX_WORD_CHARS = 40
# A single letter or digit says nothing on its own ("a", "s" from "s&p", "3" from "0.3%").
MIN_WORD_CHARS = 2
# Snowball's algorithm for each language agent/language.py detects.
STEMMERS = {
    "en": "english",
    "de": "german",
    "fr": "french",
    "es": "spanish",
    "it": "italian",
    "pt": "portuguese",
    "nl": "dutch",
}
# Function words of every language the bot knows: in a query or a report they match everything.
STOPWORDS = frozenset(word for language in LANGUAGES.values() for word in language.words)
# Distinct (language, word) stems remembered: a team's vocabulary repeats from report to report.
STEM_CACHE = 200_000


@lru_cache(maxsize=len(STEMMERS))
def _stemmer(code: str) -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer(STEMMERS.get(code, "english"))


@lru_cache(maxsize=STEM_CACHE)
def stem(word: str, code: str) -> str:
    """`word` (lower case) stemmed in the language `code` (English's stemmer for one it does not know)."""
    if word.isdigit():
        return word
    return str(_stemmer(code).stemWord(word))


def detect_code(text: str) -> str:
    """The language a report is stemmed in: the one the bot detects in its question and summary."""
    return detect(text).code


def _words(text: str) -> Iterable[str]:
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if MIN_WORD_CHARS <= len(word) <= MAX_WORD_CHARS and word not in STOPWORDS:
            yield word


def bag(weighted: Iterable[tuple[str, int]], code: str) -> Counter[str]:
    """The stems of every (text, weight) pair in language `code`, each counted `weight` times per
    occurrence (a title counts more than a sentence of a section)."""
    counts: Counter[str] = Counter()
    for text, weight in weighted:
        for word in _words(text):
            counts[stem(word, code)] += weight
    return counts


def query_words(query: str) -> list[list[str]]:
    """Each word of a query with its forms: its stem in every language the bot knows, each once."""
    return [list(dict.fromkeys(stem(word, code) for code in STEMMERS)) for word in dict.fromkeys(_words(query))]
