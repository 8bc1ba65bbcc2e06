"""The fake Slack's Home tab: views.publish, the `app_home_opened` event, and what a person does on the
tab (a button, Enter in an input that dispatches), as `block_actions` from a `home` view.

From the method's page (docs.slack.dev/reference/methods/views.publish) and the App Home guide:

- `user_id` (required: `invalid_arguments` without it; a person this workspace does not know:
  `user_not_found`) and `view` (required, a JSON string in a form or an object in JSON; missing or
  unparsable: `invalid_arguments`); `hash` optional, and when given it must be the hash of the view
  last published for that person, else `hash_conflict`. No scope beyond the bot token.
- The view's `type` must be `home`; at most 100 blocks; a section's text at most 3,000 characters;
  an input block needs a `label` and an `element`, and dispatches actions only with
  `dispatch_action: true`. A refused view answers `invalid_arguments` with the reason in
  `response_metadata.messages`, as Slack does.
- The Home tab exists when manifest.yml enables it (`features.app_home.home_tab_enabled`);
  `app_home_opened` carries `user`, `channel` (the app's DM with the person), `tab` (`home` or
  `messages`) and, after a first publish, the `view`.
- A published view is the person's own: each person's tab shows what was published for them only.

ASSUMED (the pages do not say): publishing while the manifest has the Home tab off answers
`not_enabled`.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import TYPE_CHECKING, Any

import yaml

from tests.fakes import scopes
from tests.fakes.slack_events import _envelope
from tests.fakes.slack_records import APP_ID, TEAM_ID, SlackError, _str

if TYPE_CHECKING:
    from tests.fakes.slack import FakeSlack

__all__ = ["app_home_opened_event", "home_action", "home_of", "register", "views_published"]

MAX_BLOCKS = 100
MAX_SECTION_TEXT_CHARS = 3000


def _app_home() -> dict[str, Any]:
    manifest = yaml.safe_load(scopes.MANIFEST.read_text(encoding="utf-8"))
    return (manifest.get("features") or {}).get("app_home") or {}


def register(fake: FakeSlack) -> None:
    """Teach `fake` views.publish (idempotent)."""
    if getattr(fake, "home_views", None) is not None:
        return
    fake.home_views = {}  # type: ignore[attr-defined]  # (team, user) -> every view published, oldest first
    fake.home_tab_enabled = bool(_app_home().get("home_tab_enabled"))  # type: ignore[attr-defined]
    fake._methods["views.publish"] = lambda p: _publish(fake, p)


def _invalid(why: str) -> SlackError:
    return SlackError("invalid_arguments", response_metadata={"messages": [f"[ERROR] {why}"]})


def _check(view: dict[str, Any]) -> None:
    if view.get("type") != "home":
        raise _invalid("must be home [json-pointer:/view/type]")
    blocks = view.get("blocks")
    if not isinstance(blocks, list) or not all(isinstance(b, dict) and b.get("type") for b in blocks):
        raise _invalid("must provide blocks [json-pointer:/view/blocks]")
    if len(blocks) > MAX_BLOCKS:
        raise _invalid(f"no more than {MAX_BLOCKS} items allowed [json-pointer:/view/blocks]")
    for i, block in enumerate(blocks):
        text = block.get("text")
        if block["type"] == "section" and isinstance(text, dict) and len(_str(text.get("text"))) > MAX_SECTION_TEXT_CHARS:
            raise _invalid(f"must be less than {MAX_SECTION_TEXT_CHARS + 1} characters "
                           f"[json-pointer:/view/blocks/{i}/text/text]")
        if block["type"] == "input" and not (block.get("label") and block.get("element")):
            raise _invalid(f"must provide label and element [json-pointer:/view/blocks/{i}]")


def _publish(fake: FakeSlack, p: dict[str, Any]) -> dict[str, Any]:
    if not fake.home_tab_enabled:  # type: ignore[attr-defined]
        raise SlackError("not_enabled")
    user = _str(p.get("user_id"))
    if not user:
        raise SlackError("invalid_arguments")
    if user[:1] not in "UW":
        raise SlackError("user_not_found")
    raw = p.get("view")
    try:
        view = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        raise SlackError("invalid_arguments") from None
    if not isinstance(view, dict):
        raise SlackError("invalid_arguments")
    _check(view)
    team = fake._caller.team_id
    published: list[dict[str, Any]] = fake.home_views.setdefault((team, user), [])  # type: ignore[attr-defined]
    wanted = _str(p.get("hash"))
    if wanted and published and published[-1]["hash"] != wanted:
        raise SlackError("hash_conflict")
    stored = {
        "id": published[-1]["id"] if published else f"V{secrets.token_hex(5).upper()}",
        "team_id": team, "type": "home", "blocks": view["blocks"],
        "private_metadata": _str(view.get("private_metadata")), "callback_id": _str(view.get("callback_id")),
        "state": {"values": {}}, "hash": f"{int(time.time())}.{secrets.token_hex(4)}",
        "title": view.get("title"), "close": None, "submit": None, "clear_on_close": False,
        "notify_on_close": False, "previous_view_id": None, "root_view_id": None, "app_id": APP_ID,
        "external_id": _str(view.get("external_id")), "app_installed_team_id": team, "bot_id": fake._caller.bot_id,
    }
    published.append(stored)
    return {"view": stored}


def home_of(fake: FakeSlack, user: str, team: str = TEAM_ID) -> dict[str, Any] | None:
    """The Home tab `user` sees now (the last view published for them), or None."""
    with fake._lock:
        views = fake.home_views.get((team, user)) or []  # type: ignore[attr-defined]
        return views[-1] if views else None


def views_published(fake: FakeSlack) -> list[tuple[str, str]]:
    """(team, user) of every publish, one entry per view published."""
    with fake._lock:
        return [key for key, views in fake.home_views.items() for _ in views]  # type: ignore[attr-defined]


def app_home_opened_event(user: str, *, tab: str = "home", team_id: str = TEAM_ID, bot_user_id: str = "UBOT",
                          view: dict[str, Any] | None = None) -> dict[str, Any]:
    """A person opened the app's Home (or Messages) tab."""
    event: dict[str, Any] = {"type": "app_home_opened", "user": user, "channel": f"D{user[1:]}", "tab": tab,
                             "event_ts": f"{time.time():.6f}"}
    if view is not None:
        event["view"] = view
    return _envelope(event, event_id=None, team_id=team_id, bot_user_id=bot_user_id)


def home_action(action_id: str, *, user: str, view: dict[str, Any], value: str = "", kind: str = "button",
                team_id: str = TEAM_ID) -> dict[str, Any]:
    """What Slack sends when `user` presses a button (`value` its value) or presses Enter in a dispatching
    input (`value` what they typed) on their Home tab: `block_actions` whose container is the view."""
    action: dict[str, Any] = {"action_id": action_id, "block_id": secrets.token_hex(3), "type": kind,
                              "action_ts": f"{time.time():.6f}", "value": value}
    if kind == "button":
        action["text"] = {"type": "plain_text", "text": "button"}
    return {
        "type": "block_actions",
        "user": {"id": user, "team_id": team_id},
        "api_app_id": APP_ID,
        "token": "verification-token",
        "team": {"id": team_id, "domain": "deepthread-test"},
        "container": {"type": "view", "view_id": view["id"]},
        "trigger_id": f"{secrets.randbelow(10**9)}.{secrets.token_hex(6)}",
        "view": view,
        "actions": [action],
    }
