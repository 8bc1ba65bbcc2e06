"""Who may install: a workspace listed, or any workspace of a listed Enterprise org; an org-wide
install only when its org is listed; no list admits everyone."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.slack.admission import InstallAllowlist, refusal_page

ids = st.sampled_from(["T0A", "T0B", "E0X", "E0Y"])


@given(st.lists(ids, max_size=4), st.sampled_from([None, "T0A", "T0B"]), st.sampled_from([None, "E0X", "E0Y"]),
       st.booleans(), st.sampled_from([", ", ",", " , "]))
def test_admitted_exactly_when_the_workspace_or_its_org_is_listed(
        listed: list[str], team: str | None, enterprise: str | None, org_wide: bool, sep: str) -> None:
    allow = InstallAllowlist.parse(sep.join(listed))
    expected = not listed or (enterprise in listed) or (not org_wide and team in listed)
    assert allow.admits(team, enterprise, org_wide=org_wide) is bool(expected)


def test_the_refusal_page_names_the_workspace_escaped_and_the_setting() -> None:
    page = refusal_page("T0B", "<script>Acme</script>", None)
    assert "T0B" in page and "DEEPTHREAD_INSTALL_ALLOW" in page and "<script>" not in page
