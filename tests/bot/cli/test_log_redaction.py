"""Whatever logs a payload by mistake, a token in it never leaves the process (issue 45, item 5b).

The listeners log ids, never events (tests/e2e/test_log_payloads.py); this is the backstop under them:
generated over Slack's token shapes and over any token field's value, written into a line as a dict's
repr, as JSON or as JSON inside a message, through both formatters."""
from __future__ import annotations

import json
import logging

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from bot.cli.observability import REDACTED, JsonFormatter, TextFormatter
from bot.slack.events import MentionEvent, malformed

tails = st.from_regex(r"[A-Za-z0-9]{8,24}", fullmatch=True)
shapes = st.sampled_from(["xoxb-", "xoxp-", "xoxa-", "xoxe-", "xoxr-", "xoxs-", "xapp-1-", "xoxe.xoxp-1-"])
fields = st.sampled_from(["action_token", "access_token", "refresh_token", "bot_token", "client_secret", "token"])
opaque = st.from_regex(r"[0-9]{10}\.[0-9]{6}\.[a-f0-9]{16}", fullmatch=True)  # an action token's shape


def _line(formatter: logging.Formatter, message: str) -> str:
    record = logging.LogRecord("bot.test", logging.WARNING, __file__, 1, "%s", (message,), None)
    return formatter.format(record)


@settings(max_examples=100, deadline=None)
@given(shape=shapes, tail=tails, field=fields, value=opaque, how=st.sampled_from(["repr", "json", "nested"]))
def test_no_token_in_a_payload_reaches_a_log_line(shape: str, tail: str, field: str, value: str, how: str) -> None:
    payload = {"type": "app_mention", field: value, "text": f"a token {shape}{tail} pasted"}
    message = {"repr": repr(payload), "json": json.dumps(payload), "nested": json.dumps(json.dumps(payload))}[how]
    for formatter in (TextFormatter([]), JsonFormatter([])):
        line = _line(formatter, f"ignored {message}")
        assert value not in line and f"{shape}{tail}" not in line, line
        assert REDACTED in line


def test_a_malformed_event_is_named_by_its_ids_and_fields_never_its_content() -> None:
    event = {"type": "app_mention", "text": "our Q3 figure is 0.0317", "ts": "1.2", "channel": "C1",
             "action_token": "1700000000.424242.0123456789abcdef"}
    try:
        MentionEvent.model_validate(event)
    except ValidationError as exc:
        line = malformed("app_mention", exc, {"event_id": "Ev01ABC", "team_id": "T1", "token": "verif"})
    assert line == "ignored a malformed app_mention (event_id Ev01ABC, team_id T1): user: missing"
