"""The words the bot writes itself in a thread, in the team's language: a small message catalogue.

The research model writes the report and the summary in the question's language (the engine
tells it which, agent/language.py); what the bot adds around them comes from here: the progress
message's words (phases, "Now:", "Checking:", how to steer, done / stopped / ended early, the
budget left), the report's status line, its "Summary" and "Sources" headings and its footer.
English, German, Japanese and Chinese are translated (Japanese and Chinese in catalogue_ja_zh.py,
the engine's activity lines in activity_words.py); any other language gets English words with its
own decimal mark. Names of things (`go deeper`, the stop reaction, run ids, tool progress lines the engine
writes) stay as they are.
"""

from __future__ import annotations

from agent import detect_language

from .activity_words import activity_in
from .catalogue_ja_zh import JA, NOUNS_JA_ZH, ZH

__all__ = ["Words", "money", "plural", "said_once", "words_for"]

EN: dict[str, str] = {
    "researching": "Researching",
    "compacting": "Compacting notes before continuing",
    "finishing": "Writing the summary",
    "writing": "Writing",
    "queued": "⏳ Queued: research starts as soon as a worker is free",
    "now": "Now",
    "checking": "Checking",
    "steer": "react to stop · reply “go deeper” for a longer budget · reply to add a requirement",
    "go_deeper": "Go deeper",
    "done": "Done",
    "final_report": "the pinned report is final",
    "note": "Note",
    "stopped": "Stopped",
    "ended_early": "Ended early",
    "why": "Why",
    "kept": "Sections written so far are kept in the pinned report.",
    "budget_left": "{profile} budget · {parts} left",
    "in_progress": "In progress · {sections} so far{updated}",
    "updated": " · updated {time} UTC",
    "final": "Final · {sections} · finished {time} UTC",
    "incomplete": "Incomplete",
    "asked_by": "Asked by {who}",
    "estimated": "est. {cost}",
    "run": "run {id}",
    "continues": "continues run {id}",
    "summary": "Summary",
    "sources": "Sources",
    "min": "min",
    # The report's status line before it runs, its footer's figure check and next re-check, its source
    # and chart lines, and the `source N` / `sources` replies about them.
    "fills_in": "The report fills in here as the research finds answers.",
    "helpful_label": "This report was helpful",
    "unhelpful_label": "This report was not helpful",
    "queued_status": "Queued",
    "plan_status": "Plan awaiting approval: nothing researched yet",
    "figures_checked": "{figures} checked against their sources",
    "not_found": "{n} not found in its source",
    "next_check": "next check {when} UTC",
    "fetched": "fetched {date}",
    "fetched_at": "Fetched {time} UTC",
    "snippet_only": "search snippet only",
    "snippet_unread": "search snippet only (the page itself was not read)",
    "excerpt": "excerpt",
    "excerpt_verified": "page excerpt, verified word for word against the page",
    "cited_as": "cited as {marker}",
    "passage": "The passage:",
    "around_it": "Around it on the page:",
    "page_hash": "Page text SHA-256: {hash} (to tell whether the page has changed since)",
    "no_footnote": "The report has no footnote {number} (footnotes: {known}). Reply `sources` for the list.",
    "none_yet": "none yet",
    "sources_cited": "Sources cited in the report",
    "source_n_hint": "reply `source N` for a footnote's full passage.",
    "more_sources": "… and {n} more: `source N` opens any of them.",
    "no_sources": "The report cites no sources yet.",
    "chart_posted": "chart, posted in this thread",
    "chart_updated": "updated ×{n}",
    "chart_sources": "Chart sources:",
    "revised": "revised ×{n}",
    # The progress message's plan-first line and pinned constraints; the task agents' board.
    "drafting_plan": "Drafting a plan first: nothing is researched until it is approved",
    "constraints": "Constraints",
    "correct_them": "reply to correct them",
    "task_agents": "Task agents: {done} done, {running} running",
    # The answer to a mention with no question in it.
    "help": "Ask me a research question and I will dig into it and keep a cited report pinned in this thread, "
    "e.g. `@deepthread compare the fees and tracking error of VTI, ITOT and SCHB`.",
}
DE: dict[str, str] = {
    "researching": "Recherche läuft",
    "compacting": "Notizen werden verdichtet, dann geht es weiter",
    "finishing": "Die Zusammenfassung wird geschrieben",
    "writing": "Schreibt",
    "queued": "⏳ In der Warteschlange: die Recherche beginnt, sobald ein Worker frei ist",
    "now": "Jetzt",
    "checking": "Prüfe",
    "steer": "zum Anhalten reagieren · „go deeper“ antworten für ein größeres Budget · antworten, um eine "
    "Anforderung hinzuzufügen",
    "go_deeper": "Go deeper",
    "done": "Fertig",
    "final_report": "der angeheftete Bericht ist endgültig",
    "note": "Hinweis",
    "stopped": "Angehalten",
    "ended_early": "Vorzeitig beendet",
    "why": "Warum",
    "kept": "Bereits geschriebene Abschnitte bleiben im angehefteten Bericht.",
    "budget_left": "Budget {profile} · noch {parts}",
    "in_progress": "In Arbeit · bisher {sections}{updated}",
    "updated": " · aktualisiert {time} UTC",
    "final": "Endgültig · {sections} · fertig {time} UTC",
    "incomplete": "Unvollständig",
    "asked_by": "Gefragt von {who}",
    "estimated": "ca. {cost}",
    "run": "Lauf {id}",
    "continues": "setzt Lauf {id} fort",
    "summary": "Zusammenfassung",
    "sources": "Quellen",
    "min": "Min.",
    "fills_in": "Der Bericht füllt sich hier, während die Recherche Antworten findet.",
    "helpful_label": "Dieser Bericht war hilfreich",
    "unhelpful_label": "Dieser Bericht war nicht hilfreich",
    "queued_status": "In der Warteschlange",
    "plan_status": "Plan wartet auf Freigabe: noch nichts recherchiert",
    "figures_checked": "{figures} mit ihren Quellen abgeglichen",
    "not_found": "{n} nicht in der Quelle gefunden",
    "next_check": "nächste Prüfung {when} UTC",
    "fetched": "abgerufen {date}",
    "fetched_at": "Abgerufen {time} UTC",
    "snippet_only": "nur Suchausschnitt",
    "snippet_unread": "nur Suchausschnitt (die Seite selbst wurde nicht gelesen)",
    "excerpt": "Auszug",
    "excerpt_verified": "Auszug der Seite, Wort für Wort mit der Seite abgeglichen",
    "cited_as": "zitiert als {marker}",
    "passage": "Die Stelle:",
    "around_it": "Drumherum auf der Seite:",
    "page_hash": "SHA-256 des Seitentexts: {hash} (zeigt, ob sich die Seite seither geändert hat)",
    "no_footnote": "Der Bericht hat keine Fußnote {number} (Fußnoten: {known}). Antworte `sources` für die Liste.",
    "none_yet": "noch keine",
    "sources_cited": "Im Bericht zitierte Quellen",
    "source_n_hint": "antworte `source N` für die ganze Stelle einer Fußnote.",
    "more_sources": "… und {n} weitere: `source N` öffnet jede davon.",
    "no_sources": "Der Bericht zitiert noch keine Quellen.",
    "chart_posted": "Diagramm, in diesem Thread gepostet",
    "chart_updated": "aktualisiert ×{n}",
    "chart_sources": "Quellen des Diagramms:",
    "revised": "überarbeitet ×{n}",
    "drafting_plan": "Zuerst wird ein Plan entworfen: recherchiert wird erst nach seiner Freigabe",
    "constraints": "Vorgaben",
    "correct_them": "antworten, um sie zu korrigieren",
    "task_agents": "Teilaufgaben: {done} fertig, {running} laufen",
    "help": "Stell mir eine Recherchefrage: ich gehe ihr nach und halte in diesem Thread einen Bericht mit "
    "Quellen angeheftet, z. B. `@deepthread vergleiche die Kosten und den Tracking-Fehler von VTI, ITOT und SCHB`.",
}
# Singular and plural of the nouns the bot counts.
NOUNS: dict[str, dict[str, tuple[str, str]]] = {
    "en": {
        "model request": ("model request", "model requests"),
        "source": ("source", "sources"),
        "section": ("section", "sections"),
        "figure": ("figure", "figures"),
    },
    "de": {
        "model request": ("Modellanfrage", "Modellanfragen"),
        "source": ("Quelle", "Quellen"),
        "section": ("Abschnitt", "Abschnitte"),
        "figure": ("Zahl", "Zahlen"),
    },
    **NOUNS_JA_ZH,
}
CATALOGUES = {"en": EN, "de": DE, "ja": JA, "zh": ZH}


class Words:
    """The catalogue of one language, with its decimal mark."""

    def __init__(self, code: str, decimal: str) -> None:
        self.code = code if code in CATALOGUES else "en"
        self.decimal = decimal
        self._words = CATALOGUES[self.code]

    def __call__(self, key: str, **values: object) -> str:
        return self._words[key].format(**values)

    def activity(self, line: str) -> str:
        """One of the engine's activity lines (agent/activity.py) in this language."""
        return activity_in(line, self.code)

    def noun(self, word: str, n: int) -> str:
        one, many = NOUNS[self.code].get(word, (word, word + "s"))
        return one if n == 1 else many


def words_for(question: str) -> Words:
    """The catalogue for a run: the language of its question (the thread's first)."""
    lang = detect_language(question)
    return Words(lang.code, lang.decimal)


def number(value: float, places: int, words: Words) -> str:
    text = f"{value:,.{places}f}"
    if words.decimal == ",":
        text = text.replace(",", "\u2009").replace(".", ",")  # thin space between thousands, decimal comma
    return text


def plural(n: int, word: str, words: Words) -> str:
    return f"{number(n, 0, words)} {words.noun(word, n)}"


def money(usd: float, words: Words) -> str:
    """USD as the language writes it: $0.84, or 0,84 $ with a decimal comma."""
    amount = number(usd, 2, words)
    return f"{amount} $" if words.decimal == "," else f"${amount}"


def said_once(word: str, reason: str) -> str | None:
    """A run's end and its reason as one phrase when the reason opens by saying the end again: "Stopped"
    with "stopped by <@U0ANA> at 10:42 UTC" reads "Stopped by <@U0ANA> at 10:42 UTC", not "Stopped · Why:
    stopped by …". None when the reason says something else (then both are shown)."""
    head, _, rest = reason.strip().partition(" ")
    if not rest or head.lower() != word.lower():
        return None
    return f"{word} {rest}"
