"""The operators' settings of issue 25 (model limits, metrics, log format, bulky retention): a
blank value means unset, a bad one is refused naming the variable and what it should be."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent import ModelLimits
from bot.settings import Settings

BLANK_IS_DEFAULT = [
    ("DEEPTHREAD_METRICS_PORT", "metrics_port", None),
    ("DEEPTHREAD_LOG_FORMAT", "log_format", "text"),
    ("DEEPTHREAD_BULKY_RETENTION_DAYS", "bulky_retention_days", 30.0),
    ("DEEPTHREAD_MODEL_REQUESTS_PER_MINUTE", "model_requests_per_minute", None),
    ("DEEPTHREAD_MODEL_INPUT_TOKENS_PER_MINUTE", "model_input_tokens_per_minute", None),
    ("DEEPTHREAD_MODEL_OUTPUT_TOKENS_PER_MINUTE", "model_output_tokens_per_minute", None),
    ("DEEPTHREAD_LISTEN_BACKLOG", "listen_backlog", 1024),
]

REFUSED = [
    ("DEEPTHREAD_METRICS_PORT", "abc", "valid integer"),
    ("DEEPTHREAD_METRICS_PORT", "0", "greater than or equal to 1"),
    ("DEEPTHREAD_METRICS_PORT", "70000", "less than or equal to 65535"),
    ("DEEPTHREAD_LOG_FORMAT", "xml", "'text' or 'json'"),
    ("DEEPTHREAD_BULKY_RETENTION_DAYS", "-1", "greater than 0"),
    ("DEEPTHREAD_BULKY_RETENTION_DAYS", "a month", "valid number"),
    ("DEEPTHREAD_MODEL_REQUESTS_PER_MINUTE", "0", "greater than 0"),
    ("DEEPTHREAD_MODEL_INPUT_TOKENS_PER_MINUTE", "lots", "valid number"),
    ("DEEPTHREAD_MODEL_OUTPUT_TOKENS_PER_MINUTE", "-5", "greater than 0"),
    ("DEEPTHREAD_LISTEN_BACKLOG", "0", "greater than or equal to 1"),
    ("DEEPTHREAD_LISTEN_BACKLOG", "a lot", "valid integer"),
]


@pytest.mark.parametrize("blank", ["", "   ", "\t"])
@pytest.mark.parametrize(("variable", "field", "default"), BLANK_IS_DEFAULT)
def test_a_blank_operator_setting_means_unset(variable: str, field: str, default: object, blank: str) -> None:
    assert getattr(Settings.model_validate({variable: blank}), field) == default


@pytest.mark.parametrize(("variable", "value", "says"), REFUSED)
def test_a_bad_operator_setting_is_refused_naming_the_variable(variable: str, value: str, says: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings.model_validate({variable: value})
    [error] = refused.value.errors()
    assert error["loc"][0] == variable and says in error["msg"]


def test_the_model_limits_the_operator_set_reach_the_limiter_and_unset_ones_stay_to_the_headers() -> None:
    settings = Settings.model_validate(
        {"DEEPTHREAD_MODEL_REQUESTS_PER_MINUTE": "50", "DEEPTHREAD_MODEL_OUTPUT_TOKENS_PER_MINUTE": " "}
    )
    assert settings.model_limits() == ModelLimits(requests=50.0, input_tokens=None, output_tokens=None)


def test_bulky_retention_and_metrics_port_are_read_as_numbers() -> None:
    settings = Settings.model_validate(
        {"DEEPTHREAD_BULKY_RETENTION_DAYS": "7.5", "DEEPTHREAD_METRICS_PORT": "9464", "DEEPTHREAD_LOG_FORMAT": "json"}
    )
    assert (settings.bulky_retention_days, settings.metrics_port, settings.log_format) == (7.5, 9464, "json")
