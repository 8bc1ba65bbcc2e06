"""`usage` counts 👍 / 👎: a channel sees its share rated helpful; the workspace view lists each
channel's counts, a private channel named as one (its id never shown)."""

from __future__ import annotations

from bot.desk.usage import Visibility, render_usage
from jobs.records.feedback import Tally as Ratings
from jobs.budgets.spend import MonthUsage, Tally


def _usage() -> MonthUsage:
    channels = [Tally(key="C0PUBLIC", micros=2_000_000, runs=2), Tally(key="C0SECRET", micros=1_000_000, runs=1)]
    return MonthUsage(team="T0TEST", month="2026-12", total=Tally(key="total", micros=3_000_000, runs=3),
                      channels=channels, users=[], days=[], top_runs=[])


def test_the_workspace_view_shows_each_channels_share_and_names_a_private_one_as_such() -> None:
    seen = Visibility(visible={"C0PUBLIC"}, kinds={"C0PUBLIC": "public", "C0SECRET": "private"})
    text = render_usage(_usage(), [], None, seen=seen, channel_ratings={
        "C0PUBLIC": Ratings(rated=2, helpful=1), "C0SECRET": Ratings(rated=1, helpful=1)})
    assert "*Feedback by channel:*" in text
    assert "• <#C0PUBLIC>: 2 reports rated · 50% rated helpful" in text
    assert "• a private channel: 1 report rated · 100% rated helpful" in text
    assert "C0SECRET" not in text


def test_a_workspace_without_verdicts_lists_no_feedback() -> None:
    seen = Visibility(visible={"C0PUBLIC"}, kinds={})
    assert "Feedback" not in render_usage(_usage(), [], None, seen=seen, channel_ratings={"C0PUBLIC": Ratings()})
