"""A thread's messages as their events arrived, for an app Slack limits to reading 15 a minute.

An app distributed to other organizations outside the Slack Marketplace may call
`conversations.replies` once a minute per workspace, at most 15 messages an answer
(DEEPTHREAD_SLACK_DISTRIBUTED; docs/slack-app.md). A thread a run reads is then mostly known
already: serve records every message event of a thread with a run (the mention that starts one,
every reply after it) here, and the run's SlackWorkspace reads these first, paging
`conversations.replies` only for what came before, 15 at a time, once a minute (workspace.py).

One hash per thread, ts -> the message as the Web API shows one (user, text, files, bot_id),
kept as long as the thread's runs (DEEPTHREAD_RETENTION_DAYS, refreshed by each message) and
deleted with the thread by a forget (its key is a thread's: bot/keys.py, bot/desk/retention.py).
"""

from __future__ import annotations

import json
from typing import Any

from redis import Redis

from bot import keys

__all__ = ["ThreadLog"]

# What of a message event is kept: what the Web API's message objects carry for our readers.
KEPT_FIELDS = ("ts", "thread_ts", "user", "bot_id", "text", "files", "subtype")
# A file object's fields a reader uses (workspace.py `_info_of`); the rest (thumbnails, URLs) is not kept.
KEPT_FILE_FIELDS = ("id", "name", "title", "mimetype", "filetype", "size", "user", "mode", "permalink", "created")


def _kept(event: dict[str, Any]) -> dict[str, Any]:
    message = {name: event[name] for name in KEPT_FIELDS if event.get(name) not in (None, "", [])}
    if "files" in message:
        message["files"] = [
            {name: f[name] for name in KEPT_FILE_FIELDS if name in f} for f in message["files"] if isinstance(f, dict)
        ]
    return message


class ThreadLog:
    """The messages of threads as their events arrived (sync Redis: call it off the event loop)."""

    def __init__(self, redis: Redis, ttl_seconds: int) -> None:
        self.redis = redis
        self.ttl_seconds = ttl_seconds

    def record(self, team: str | None, channel: str, thread_ts: str, event: dict[str, Any]) -> None:
        """Keep `event`'s message (a `message` or `app_mention` event) in its thread's log."""
        ts = str(event.get("ts") or "")
        if not ts:
            return
        key = keys.thread_log(team, channel, thread_ts)
        pipe = self.redis.pipeline()
        pipe.hset(key, ts, json.dumps(_kept(event), ensure_ascii=False))
        pipe.expire(key, self.ttl_seconds)
        pipe.execute()

    def messages(self, team: str | None, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """The thread's recorded messages, oldest first."""
        raw = self.redis.hgetall(keys.thread_log(team, channel, thread_ts))
        found = []
        for value in raw.values():
            try:
                message = json.loads(value)
            except ValueError:
                continue  # a record this version cannot read is not worth failing the thread for
            if isinstance(message, dict) and message.get("ts"):
                found.append(message)
        return sorted(found, key=lambda m: float(m["ts"]))
