"""Settings: one rule for every variable (empty or whitespace-only means unset), generated over every
field Settings has, so a new setting or secret is covered by itself."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.cli.doctor import blank_problems
from bot.settings import Settings, blank_variables, default_data_dir, variable_names

BLANKS = ["", "   ", "\t \n"]


def _variable(name: str) -> str:
    alias, *_ = Settings.model_fields[name].validation_alias.choices  # type: ignore[union-attr]
    return str(alias)  # the first name (AWS_REGION before AWS_DEFAULT_REGION)


def _is_secret(name: str) -> bool:
    return "SecretStr" in str(Settings.model_fields[name].annotation)


FIELDS = sorted(Settings.model_fields)
SECRETS = [name for name in FIELDS if _is_secret(name)]


def _defaults(monkeypatch: pytest.MonkeyPatch) -> Settings:
    for variable in variable_names():
        monkeypatch.delenv(variable, raising=False)
    return Settings()


def test_the_secret_fields_are_found_from_settings_itself() -> None:
    assert {"slack_bot_token", "slack_signing_secret", "slack_app_token", "anthropic_api_key"} <= set(SECRETS)


@pytest.mark.parametrize("blank", BLANKS, ids=repr)
@pytest.mark.parametrize("name", FIELDS)
def test_a_blank_variable_is_the_same_as_an_absent_one(name: str, blank: str, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = getattr(_defaults(monkeypatch), name)
    monkeypatch.setenv(_variable(name), blank)
    assert getattr(Settings(), name) == expected
    assert blank_variables() == [_variable(name)]


@pytest.mark.parametrize("blank", BLANKS, ids=repr)
@pytest.mark.parametrize("name", SECRETS)
def test_a_blank_secret_is_unset_and_doctor_says_it_is_blank(name: str, blank: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _defaults(monkeypatch)
    monkeypatch.setenv(_variable(name), blank)
    settings = Settings()
    assert settings.secret(name) is None
    [line] = blank_problems(blank_variables())
    assert line.startswith(f"{_variable(name)} is set but blank")
    # Passed in code (tests, `ask`), a blank secret counts as unset too.
    assert Settings(**{name: SecretStr(blank)}).secret(name) is None


@pytest.mark.parametrize("blank", BLANKS, ids=repr)
def test_a_blank_app_token_means_http_mode_with_verification(blank: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _defaults(monkeypatch)
    monkeypatch.setenv("SLACK_APP_TOKEN", blank)
    assert Settings().socket_mode is False
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    assert Settings().socket_mode is True


@pytest.mark.parametrize("blank", BLANKS, ids=repr)
def test_a_blank_data_dir_keeps_the_default(blank: str, tmp_path: Path) -> None:
    assert default_data_dir({"DEEPTHREAD_DATA_DIR": blank, "XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "deepthread"
    assert default_data_dir({"XDG_DATA_HOME": blank}) == Path.home() / ".local" / "share" / "deepthread"
