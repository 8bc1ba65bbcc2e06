"""The fake Slack's Web API methods, with Slack's argument rules, limits and error codes.

A mixin of FakeSlack (slack.py): the server there routes `/api/<method>` to these handlers
under its lock; each returns the response body's fields or raises SlackError."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from tests.fakes.slack_records import (
    MAX_BLOCKS,
    MAX_BLOCKS_TOTAL_CHARS,
    MAX_HEADER_TEXT_CHARS,
    MAX_MARKDOWN_TOTAL_CHARS,
    MAX_METADATA_EVENT_TYPE_CHARS,
    MAX_METADATA_PAYLOAD_BYTES,
    MAX_SECTION_FIELD_CHARS,
    MAX_SECTION_TEXT_CHARS,
    MAX_TEXT_CHARS,
    TEAM_NAME,
    Ephemeral,
    Pin,
    SlackError,
    SlackMessage,
    UploadedFile,
    _str,
)

# The other organization of a Slack Connect channel (add_conversation(..., ext_shared=True)).
EXTERNAL_TEAM = "T0PARTNER"

if TYPE_CHECKING:
    from tests.fakes.slack import FakeSlack

    _Base = FakeSlack
else:
    _Base = object


class WebApiMethods(_Base):
    """Handlers for chat.*, pins.*, reactions.*, conversations.*, files.*, users.info, auth.test."""


    def _users_info(self, p: dict[str, Any]) -> dict[str, Any]:
        user = _str(p.get("user"))
        if not user or user[:1] not in "UW":
            raise SlackError("user_not_found")
        known = self.users.get(user, {})
        name = known.get("name", user.lower())
        body: dict[str, Any] = {
            "id": user, "team_id": known.get("team_id", self._caller.team_id), "name": name, "real_name": name.title(),
            "deleted": False, "is_admin": known.get("is_admin", user in self.admins),
            "is_owner": known.get("is_owner", False), "is_bot": user == self._caller.bot_user_id,
            "is_restricted": known.get("guest", False), "is_ultra_restricted": False,
            "profile": {"display_name": name, "real_name": name.title(), "team": known.get("team_id", self._caller.team_id)},
        }
        if known.get("team_id", self._caller.team_id) != self._caller.team_id:
            body["is_stranger"] = True  # Slack Connect: a person of another organization
        if known.get("enterprise_id"):
            body["enterprise_user"] = {"id": user, "enterprise_id": known["enterprise_id"],
                                       "is_admin": body["is_admin"], "is_owner": body["is_owner"],
                                       "teams": [body["team_id"]]}
        return {"user": body}

    def _conversation(self, channel: str) -> dict[str, Any]:
        if not channel or channel[:1] not in "CGD":
            raise SlackError("channel_not_found")
        return self.conversations.get(channel) or {"name": channel.lower(), "private": channel[:1] in "GD",
                                                    "members": None, "ext_shared": False}

    def _conversations_info(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = _str(p.get("channel"))
        known = self._conversation(channel)
        im = channel.startswith("D")
        body: dict[str, Any] = {
            "id": channel, "created": 1_700_000_000, "is_im": im, "is_mpim": False,
            "is_channel": not im and not known["private"], "is_group": not im and known["private"],
            "is_private": known["private"], "is_archived": False, "is_general": False,
            "is_shared": known["ext_shared"], "is_ext_shared": known["ext_shared"], "is_org_shared": False,
            "is_pending_ext_shared": False, "context_team_id": self._caller.team_id,
        }
        if known["ext_shared"]:  # Slack lists the organizations in a Slack Connect channel
            body["shared_team_ids"] = [self._caller.team_id, EXTERNAL_TEAM]
            body["conversation_host_id"] = self._caller.team_id
        if im:
            members = known["members"] or []
            body["user"] = next((m for m in members if m != self._caller.bot_user_id), "")
        else:
            body["name"] = known["name"]
        return {"channel": body}

    def _conversations_members(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = _str(p.get("channel"))
        known = self._conversation(channel)
        members = known["members"]
        if members is None:  # not described: the bot and whoever has written there
            members = list(dict.fromkeys([self._caller.bot_user_id, *(m.user for m in self.messages(channel) if m.user)]))
        return _paginate(list(members), p, "members")

    def _auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"https://{self._caller.domain}/" if self._caller is not self.default_workspace
            else "https://deepthread-test.slack.com/",
            "team": self._caller.name if self._caller is not self.default_workspace else TEAM_NAME,
            "user": "deepthread",
            "team_id": self._caller.team_id,
            "user_id": self._caller.bot_user_id,
            "bot_id": self._caller.bot_id,
            "is_enterprise_install": self._caller.org_wide,
            **({"enterprise_id": self._caller.enterprise_id} if self._caller.enterprise_id else {}),
        }

    def _chat_post_message(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = _str(p.get("channel"))
        if not channel:
            raise SlackError("channel_not_found")
        text, blocks = _text_and_blocks(p)
        if not text and not blocks and not p.get("attachments"):
            raise SlackError("no_text")
        thread_ts = _str(p.get("thread_ts")) or None
        if thread_ts is not None:
            # The parent need not be seeded (events arrive without it); a reply's ts means its thread.
            parent = self._messages.get(channel, {}).get(thread_ts)
            if parent is not None and parent.thread_ts and parent.thread_ts != parent.ts:
                thread_ts = parent.thread_ts
        metadata = _metadata(p)
        msg = SlackMessage(channel=channel, ts=self._next_ts(), text=text, blocks=blocks,
                           thread_ts=thread_ts, user=self._caller.bot_user_id, bot_id=self._caller.bot_id, metadata=metadata)
        self._store(msg)
        return {"channel": channel, "ts": msg.ts, "message": self._render(msg, with_metadata=True)}

    def _chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("ts"))
        if not channel:
            raise SlackError("channel_not_found")
        msg = self._find(channel, ts)
        if msg.user != self._caller.bot_user_id:
            raise SlackError("cant_update_message")
        has_text, has_blocks = "text" in p, "blocks" in p
        if not has_text and not has_blocks and not p.get("attachments"):
            raise SlackError("no_text")
        text, blocks = _text_and_blocks(p)
        metadata = _metadata(p)
        msg.history.append(msg.text)
        msg.edits += 1
        if metadata is not None:  # omitted: the message keeps the metadata it has
            msg.metadata = metadata
        msg.edited_ts = self._next_ts()
        if has_text:
            msg.text = text
        if has_blocks:
            # An empty list removes the blocks; omitting the field keeps them (Slack's rule).
            msg.blocks = blocks or None
        return {"channel": channel, "ts": ts, "text": msg.text, "message": self._render(msg)}

    def _chat_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("ts"))
        msg = self._find(channel, ts)
        if msg.user != self._caller.bot_user_id:
            raise SlackError("cant_delete_message")
        msg.deleted = True
        return {"channel": channel, "ts": ts}

    def _chat_post_ephemeral(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, user = _str(p.get("channel")), _str(p.get("user"))
        if not channel:
            raise SlackError("channel_not_found")
        if not user:
            raise SlackError("user_not_found")
        text, blocks = _text_and_blocks(p)
        if not text and not blocks and not p.get("attachments"):
            raise SlackError("no_text")
        ts = self._next_ts()
        self._ephemerals.append(Ephemeral(channel, user, text, blocks, _str(p.get("thread_ts")) or None, ts))
        return {"message_ts": ts}

    def _chat_get_permalink(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("message_ts"))
        self._find(channel, ts)
        link = f"https://deepthread-test.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        return {"channel": channel, "permalink": link}

    def _pins_add(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("timestamp"))
        if not channel:
            raise SlackError("channel_not_found")
        if not ts:
            raise SlackError("no_item_specified")
        self._find(channel, ts)
        pins = self._pins.setdefault(channel, [])
        if any(pin.ts == ts for pin in pins):
            raise SlackError("already_pinned")
        pins.append(Pin(channel, ts, self._caller.bot_user_id, int(time.time())))
        return {}

    def _pins_remove(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("timestamp"))
        pins = self._pins.get(channel, [])
        for pin in pins:
            if pin.ts == ts:
                pins.remove(pin)
                return {}
        raise SlackError("no_pin")

    def _pins_list(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = _str(p.get("channel"))
        if not channel:
            raise SlackError("channel_not_found")
        items = []
        for pin in self._pins.get(channel, []):
            m = self._messages.get(channel, {}).get(pin.ts)
            if m is None or m.deleted:
                continue
            items.append({"type": "message", "created": pin.created, "created_by": pin.created_by,
                          "channel": channel, "message": self._render(m)})
        return {"items": items}

    def _reactions_add(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts, name = _str(p.get("channel")), _str(p.get("timestamp")), _str(p.get("name"))
        if not name:
            raise SlackError("invalid_name")
        msg = self._find(channel, ts)
        users = msg.reactions.setdefault(name, [])
        if self._caller.bot_user_id in users:
            raise SlackError("already_reacted")
        users.append(self._caller.bot_user_id)
        return {}

    def _reactions_remove(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts, name = _str(p.get("channel")), _str(p.get("timestamp")), _str(p.get("name"))
        msg = self._find(channel, ts)
        users = msg.reactions.get(name, [])
        if self._caller.bot_user_id not in users:
            raise SlackError("no_reaction")
        users.remove(self._caller.bot_user_id)
        if not users:
            del msg.reactions[name]
        return {}

    def _conversations_replies(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("ts"))
        if not channel:
            raise SlackError("channel_not_found")
        root = self._messages.get(channel, {}).get(ts)
        if root is not None and root.thread_ts and root.thread_ts != root.ts:
            ts = root.thread_ts  # a reply's ts names its whole thread
        with_metadata = _flag(p.get("include_all_metadata"))
        msgs = [self._render(m, with_metadata=with_metadata) for m in self.thread(channel, ts)]
        if not msgs:
            raise SlackError("thread_not_found")
        return _paginate(msgs, self._capped(p), "messages")

    def _conversations_history(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = _str(p.get("channel"))
        if not channel:
            raise SlackError("channel_not_found")
        # Top-level messages only, newest first, like Slack.
        top = [m for m in self.messages(channel) if not m.thread_ts or m.thread_ts == m.ts]
        with_metadata = _flag(p.get("include_all_metadata"))
        return _paginate([self._render(m, with_metadata=with_metadata) for m in reversed(top)], self._capped(p),
                         "messages")

    def _capped(self, p: dict[str, Any]) -> dict[str, Any]:
        """A history read's `limit` as Slack applies it: a distributed app gets at most history_cap."""
        cap = self.history_cap
        if cap is None:
            return p
        try:
            asked = int(p.get("limit") or cap)
        except ValueError:
            asked = cap
        return {**p, "limit": min(asked, cap)}

    def _set_status(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, thread_ts = _str(p.get("channel_id")), _str(p.get("thread_ts"))
        if not channel or not thread_ts or "status" not in p:
            raise SlackError("invalid_arguments")
        self._statuses.append((channel, thread_ts, _str(p.get("status"))))
        return {}

    def _files_get_upload_url(self, p: dict[str, Any]) -> dict[str, Any]:
        filename = _str(p.get("filename"))
        try:
            length = int(p.get("length", ""))
        except ValueError:
            raise SlackError("invalid_arguments") from None
        if not filename or length < 0:
            raise SlackError("invalid_arguments")
        file_id = f"F{next(self._file_counter):08d}"
        self._files[file_id] = UploadedFile(id=file_id, filename=filename, length=length, team=self._caller.team_id)
        return {"upload_url": f"{self._origin}/upload/{file_id}", "file_id": file_id}

    def _files_complete_upload(self, p: dict[str, Any]) -> dict[str, Any]:
        raw = p.get("files")
        try:
            entries = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            raise SlackError("invalid_arguments") from None
        if not isinstance(entries, list) or not entries:
            raise SlackError("invalid_arguments")
        channel = _str(p.get("channel_id")) or None
        thread_ts = _str(p.get("thread_ts")) or None
        comment = _str(p.get("initial_comment")) or None
        done = []
        for entry in entries:
            f = self._files.get(str(entry.get("id", "")))
            if f is None or f.deleted or f.content is None or f.team != self._caller.team_id:
                raise SlackError("file_not_found")
            f.title = entry.get("title") or f.filename
            f.channel_id, f.thread_ts, f.initial_comment, f.completed = channel, thread_ts, comment, True
            done.append(f)
        if channel is not None:
            # Sharing a file posts a message carrying it, like Slack does.
            msg = SlackMessage(channel=channel, ts=self._next_ts(), text=comment or "", thread_ts=thread_ts,
                               user=self._caller.bot_user_id, bot_id=self._caller.bot_id, files=[f.id for f in done])
            self._store(msg)
        # Full file objects, as Slack answers (the permalink is what a message links to).
        return {"files": [{"id": f.id, "title": f.title, "name": f.filename, "size": len(f.content or b""),
                           "permalink": f"https://deepthread-test.slack.com/files/{self._caller.bot_user_id}/{f.id}/{f.filename}"}
                          for f in done]}

    def _files_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        f = self._files.get(_str(p.get("file")))
        if f is None or f.deleted or f.team != self._caller.team_id:
            raise SlackError("file_not_found")  # another workspace's file does not exist here
        f.deleted = True
        return {}


def _paginate(items: list[dict[str, Any]], p: dict[str, Any], key: str) -> dict[str, Any]:
    """Cursor pagination: the cursor is just the offset of the next page."""
    try:
        limit = max(1, min(1000, int(p.get("limit") or 1000)))
        start = int(p.get("cursor") or 0)
    except ValueError:
        raise SlackError("invalid_cursor") from None
    page = items[start:start + limit]
    more = start + limit < len(items)
    return {key: page, "has_more": more, "response_metadata": {"next_cursor": str(start + limit) if more else ""}}


def _flag(value: Any) -> bool:
    """A boolean argument as Slack reads it: true/1 in a form or query, true in JSON."""
    return value is True or str(value).lower() in ("true", "1")


def _metadata(p: dict[str, Any]) -> dict[str, Any] | None:
    """Read and check `metadata` ({"event_type": str, "event_payload": object}), sent as JSON or as a
    JSON string in a form; None when absent."""
    raw = p.get("metadata")
    if raw is None or raw == "":
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise SlackError("invalid_metadata_format") from None
    if not isinstance(raw, dict):
        raise SlackError("invalid_metadata_format")
    event_type, payload = raw.get("event_type"), raw.get("event_payload")
    if (not isinstance(event_type, str) or not event_type or len(event_type) > MAX_METADATA_EVENT_TYPE_CHARS
            or not isinstance(payload, dict)):
        raise SlackError("invalid_metadata_schema")
    if len(json.dumps(payload).encode()) > MAX_METADATA_PAYLOAD_BYTES:
        raise SlackError("metadata_too_large")
    return {"event_type": event_type, "event_payload": payload}


def _text_and_blocks(p: dict[str, Any]) -> tuple[str, list[dict[str, Any]] | None]:
    """Read and check text and blocks against Slack's limits."""
    text = _str(p.get("text"))
    if len(text) > MAX_TEXT_CHARS:
        raise SlackError("msg_too_long")
    raw = p.get("blocks")
    if raw is None or raw == "":
        return text, None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise SlackError("invalid_blocks_format") from None
    if not isinstance(raw, list) or not all(isinstance(b, dict) and b.get("type") for b in raw):
        raise SlackError("invalid_blocks_format")
    _check_blocks(raw)
    return text, raw


def _invalid(why: str) -> SlackError:
    return SlackError("invalid_blocks", response_metadata={"messages": [f"[ERROR] {why}"]})


def _check_blocks(blocks: list[dict[str, Any]]) -> None:
    if len(blocks) > MAX_BLOCKS:
        raise _invalid(f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]")
    markdown_total = 0
    for i, b in enumerate(blocks):
        kind = b["type"]
        if kind == "section":
            t = b.get("text")
            if isinstance(t, dict) and len(_str(t.get("text"))) > MAX_SECTION_TEXT_CHARS:
                raise _invalid(f"must be less than {MAX_SECTION_TEXT_CHARS + 1} characters "
                               f"[json-pointer:/blocks/{i}/text/text]")
            for j, f in enumerate(b.get("fields") or []):
                if isinstance(f, dict) and len(_str(f.get("text"))) > MAX_SECTION_FIELD_CHARS:
                    raise _invalid(f"must be less than {MAX_SECTION_FIELD_CHARS + 1} characters "
                                   f"[json-pointer:/blocks/{i}/fields/{j}/text]")
            if t is None and not b.get("fields"):
                raise _invalid(f"must provide either text or fields [json-pointer:/blocks/{i}]")
        elif kind == "header":
            t = b.get("text")
            if isinstance(t, dict) and len(_str(t.get("text"))) > MAX_HEADER_TEXT_CHARS:
                raise _invalid(f"must be less than {MAX_HEADER_TEXT_CHARS + 1} characters "
                               f"[json-pointer:/blocks/{i}/text/text]")
        elif kind == "markdown":
            markdown_total += len(_str(b.get("text")))
    if markdown_total > MAX_MARKDOWN_TOTAL_CHARS:
        raise _invalid(f"markdown blocks exceed {MAX_MARKDOWN_TOTAL_CHARS} characters in total")
    if sum(len(s) for s in _texts(blocks)) > MAX_BLOCKS_TOTAL_CHARS:
        raise SlackError("msg_blocks_too_long")


def _texts(node: Any) -> list[str]:
    """Every string under a "text" key, at any depth (section, markdown, context, rich_text…)."""
    out: list[str] = []
    if isinstance(node, list):
        for item in node:
            out.extend(_texts(item))
    elif isinstance(node, dict):
        for k, v in node.items():
            if k == "text" and isinstance(v, str):
                out.append(v)
            else:
                out.extend(_texts(v))
    return out
