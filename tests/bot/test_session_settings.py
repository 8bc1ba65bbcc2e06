"""Settings are read once from the environment: an empty or whitespace-only value means unset (its
default applies), and a wrong value is named, never a traceback."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.settings import DEFAULT_SESSION_IDLE_HOURS, Settings

BLANKS = ["", " ", "\t", "  \n"]


@pytest.mark.parametrize("blank", BLANKS)
@pytest.mark.parametrize(("variable", "field", "default"), [
    ("DEEPTHREAD_REPORT", "report", "message"),
    ("DEEPTHREAD_SESSION_IDLE_HOURS", "session_idle_hours", DEFAULT_SESSION_IDLE_HOURS),
    ("DEEPTHREAD_PROGRESS", "progress", "message"),
    ("SLACK_APP_TOKEN", "slack_app_token", None),
    ("PORT", "port", 3000),
])
def test_a_blank_value_means_unset(monkeypatch: pytest.MonkeyPatch, blank: str, variable: str, field: str,
                                   default: object) -> None:
    monkeypatch.setenv(variable, blank)
    assert getattr(Settings(), field) == default


@pytest.mark.parametrize(("variable", "value"), [("DEEPTHREAD_REPORT", "canvases"),
                                                 ("DEEPTHREAD_SESSION_IDLE_HOURS", "0")])
def test_a_wrong_value_names_its_variable(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert [str(e["loc"][0]) for e in refused.value.errors()] == [variable]


def test_the_report_and_session_settings_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPTHREAD_REPORT", "canvas")
    monkeypatch.setenv("DEEPTHREAD_SESSION_IDLE_HOURS", "0.5")
    settings = Settings()
    assert settings.report == "canvas" and settings.session_idle_hours == 0.5
