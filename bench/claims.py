"""The claim check measured on hand-labelled cases: does it catch claims their source does not
support, and leave alone the ones it does?

    .venv/bin/python -m bench.claims [--cases FILE.jsonl] [--quiet]

Each line of FILE is `{"claim", "source", "supported": bool}`, optionally `"kind"` (what is wrong:
"different topic", "wrong figure", "wrong name or date", …; "supported" for a supported one),
`"language"`, `"page"` (the saved page the source was cut from, under ../shared/fixtures/pages),
`"url"` and `"title"`. The default FILE is the shipped set, bench/claims_cases.jsonl.

Each case runs through the same pipeline as a run's write_section (agent/claims/check.py): the
source is the claim's one cited passage. With no model configured the deterministic layer runs
alone (anchor and rules: what it does not refuse counts as not flagged) and the bench says so; with
DEEPTHREAD_MODEL and a model key (ANTHROPIC_API_KEY, or the provider's credentials) the small model
(DEEPTHREAD_SMALL_MODEL) judges what the rules pass, as it does in a run, and "partial" counts as flagged.

Prints each case's verdict, the counts per kind, whether each goal is met, and last:
`claims: unsupported caught X/Y, supported flagged Z/W, N cases (judge: NAME)`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from agent.claims.check import Checked, ToCheck, check
from agent.claims.judge import SmallModel
from agent.events import Source
from agent.language import detect

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).resolve().parent / "claims_cases.jsonl"
PAGES = ROOT.parent / "shared" / "fixtures" / "pages"
# The deterministic layer's goals (issue 46): these kinds caught, supported ones left alone.
RULE_KINDS = ("different topic", "wrong figure", "wrong name or date")
MIN_CAUGHT = 0.90
MAX_FLAGGED = 0.05
CLAIM_CHARS = 90
WHY_CHARS = 110


class Case(BaseModel):
    claim: str
    source: str
    supported: bool
    kind: str | None = None
    language: str | None = None
    page: str | None = None
    url: str = ""
    title: str = ""


@dataclass
class Outcome:
    case: Case
    result: Checked

    @property
    def flagged(self) -> bool:
        return self.result.verdict in ("unsupported", "partial")

    @property
    def kind(self) -> str:
        return self.case.kind or ("supported" if self.case.supported else "unsupported")


def read_cases(path: Path) -> list[Case]:
    cases = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            cases.append(Case.model_validate_json(line))
        except ValidationError as exc:
            raise SystemExit(f"{path}:{n}: not a case ({exc.errors()[0]['msg']}): each line is "
                             '{"claim", "source", "supported": true|false} with an optional "kind"') from None
    return cases


def verify_sources(cases: Sequence[Case]) -> list[str]:
    """Whether each case's source is really on the page it names (when the pages are here)."""
    from agent.tools.extract import html_text
    from agent.tools.links import LinkTable

    if not PAGES.is_dir():
        return [f"the saved pages ({PAGES}) are absent: the cases' sources were not checked against their pages"]
    texts: dict[str, str] = {}
    missing = []
    for case in cases:
        if not case.page:
            continue
        if case.page not in texts:
            path = PAGES / case.page
            texts[case.page] = " ".join(html_text(path.read_bytes(), case.url or "https://x/", LinkTable()).plain.split()) \
                if path.exists() else ""
        if " ".join(case.source.split()) not in texts[case.page]:
            missing.append(case.page)
    pages = len({c.page for c in cases if c.page})
    lines = [f"sources checked against {pages} saved pages in {PAGES}: "
             + ("every source is on its page" if not missing else f"{len(missing)} NOT found on their page")]
    lines += [f"  not on {page}" for page in sorted(set(missing))]
    return lines


def configured_judge() -> tuple[SmallModel | None, str]:
    """The small model when DEEPTHREAD_MODEL and credentials are set (read here, at the edge), else none."""
    if not os.environ.get("DEEPTHREAD_MODEL", "").strip():
        return None, "none"
    from agent import model_api
    from agent.model import ModelClient
    from bot.settings import Settings

    settings = Settings()
    config = settings.provider_config()
    if config.provider == "anthropic" and not config.api_key:
        return None, "none"
    client = model_api(config)
    model = ModelClient(client, main_model=settings.model, small_model=settings.small_model, timeout=120,
                        provider=settings.model_provider)
    return model, settings.small_model


async def run_cases(cases: Sequence[Case], judge: SmallModel | None) -> list[Outcome]:
    outcomes = []
    for case in cases:
        source = Source(marker="s1", url=case.url or "https://example.org/", title=case.title, passage=case.source)
        language = detect(case.claim)
        [result] = await check([ToCheck(f"{case.claim} [s1]", [source])], language=language, judge=judge)
        outcomes.append(Outcome(case, result))
    return outcomes


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def case_line(n: int, outcome: Outcome) -> str:
    expected = "supported" if outcome.case.supported else "unsupported"
    right = outcome.flagged != outcome.case.supported
    verdict = outcome.result.verdict if outcome.result.by != "none" else "passed the rules"
    mark = "ok  " if right else "MISS"
    why = f" — {_short(outcome.result.differs, WHY_CHARS)}" if outcome.result.differs else ""
    return (f"{mark} {n:>3} [{outcome.kind}, {outcome.case.language or detect(outcome.case.claim).code}] "
            f"expected {expected}, got {verdict}: {_short(outcome.case.claim, CLAIM_CHARS)}{why}")


def summary(outcomes: Sequence[Outcome], judge: str) -> tuple[list[str], bool]:
    """The counts per kind, each goal met or not, and the contract's last line."""
    lines = []
    kinds = Counter(o.kind for o in outcomes)
    for kind in kinds:
        mine = [o for o in outcomes if o.kind == kind]
        if all(o.case.supported for o in mine):
            lines.append(f"  {kind}: {sum(o.flagged for o in mine)}/{len(mine)} flagged")
        else:
            lines.append(f"  {kind}: {sum(o.flagged for o in mine if not o.case.supported)}/{len(mine)} caught")
    unsupported = [o for o in outcomes if not o.case.supported]
    supported = [o for o in outcomes if o.case.supported]
    caught = sum(o.flagged for o in unsupported)
    flagged = sum(o.flagged for o in supported)
    goal_kinds = [o for o in unsupported if judge != "none" or o.kind in RULE_KINDS]
    goal_caught = sum(o.flagged for o in goal_kinds)
    what = "every unsupported kind" if judge != "none" else ", ".join(f'"{k}"' for k in RULE_KINDS)
    caught_met = bool(goal_kinds) and goal_caught / len(goal_kinds) >= MIN_CAUGHT
    flagged_met = bool(supported) and flagged / len(supported) <= MAX_FLAGGED
    layer = "judge and rules" if judge != "none" else "deterministic layer"
    lines.append(f"goal ({layer}): {what} caught ≥ {MIN_CAUGHT:.0%}: {goal_caught}/{len(goal_kinds)} "
                 f"({goal_caught / max(1, len(goal_kinds)):.0%}) — {'met' if caught_met else 'NOT met'}")
    lines.append(f"goal ({layer}): supported claims flagged ≤ {MAX_FLAGGED:.0%}: {flagged}/{len(supported)} "
                 f"({flagged / max(1, len(supported)):.0%}) — {'met' if flagged_met else 'NOT met'}")
    lines.append(f"claims: unsupported caught {caught}/{len(unsupported)}, supported flagged {flagged}/{len(supported)}, "
                 f"{len(outcomes)} cases (judge: {judge})")
    return lines, caught_met and flagged_met


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.claims", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, default=CASES, help="the cases, one JSON object a line")
    parser.add_argument("--quiet", action="store_true", help="print only the misses and the summary")
    args = parser.parse_args(argv)
    if not args.cases.exists():
        print(f"{args.cases}: no such file. Pass --cases FILE.jsonl (the shipped set is {CASES}).", file=sys.stderr)
        return 2
    cases = read_cases(args.cases)
    for line in verify_sources(cases):
        print(line)
    judge, name = configured_judge()
    if judge is None:
        print("no model configured (DEEPTHREAD_MODEL and a key): the deterministic layer alone (anchor and rules); "
              "a claim the rules pass counts as not flagged")
    else:
        print(f"judge: {name} (the small model) on what the rules pass; partial counts as flagged")
    outcomes = asyncio.run(run_cases(cases, judge))
    for n, outcome in enumerate(outcomes, 1):
        line = case_line(n, outcome)
        if not args.quiet or line.startswith("MISS"):
            print(line)
    lines, _met = summary(outcomes, name)
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
