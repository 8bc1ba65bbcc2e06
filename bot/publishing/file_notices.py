"""A thread file the bot cannot open is said in the thread, once, in words a person can act on.

The engine tells the model why a file cannot be read and records, in run state, what the people
in the thread should hear (`RunState.file_notices`, from the workspace's refusal: deleted, shared
where the bot is not a member, a scope the app lacks, too large). The publisher posts each as a
reply in the thread the first time any run of that thread meets it: `deepthread:told-files:
{channel}:{thread}` holds the files already told (the `SADD` that adds one decides which process
posts it), and a post Slack refused is forgotten there so a later sync says it.
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis as AsyncRedis
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot import keys
from jobs import RunState

__all__ = ["FileNotices"]

log = logging.getLogger("bot.publisher.files")

# Remembered as long as run state is: a thread's later runs do not say it again.
TOLD_TTL_SECONDS = 90 * 24 * 3600
# Slack errors after which nothing can be posted in this thread: do not try again.
CANNOT_POST = frozenset({"channel_not_found", "is_archived", "not_in_channel", "restricted_action"})


class FileNotices:
    def __init__(self, redis: AsyncRedis, client: AsyncWebClient) -> None:
        self.redis = redis
        self.client = client  # the limited client: a post waits for its channel's slot

    async def sync(self, state: RunState) -> bool:
        """Post each notice the thread has not been told yet; False when a retry later is worthwhile."""
        run = state.run
        if not run.channel or not run.thread_ts or not state.file_notices:
            return True
        key = keys.told_files(run.team, run.channel, run.thread_ts)
        ok = True
        for notice in state.file_notices:
            if not await self.redis.sadd(key, notice.file_id):
                continue  # told already, by this run, an earlier one, or another process
            await self.redis.expire(key, TOLD_TTL_SECONDS)
            try:
                await self.client.chat_postMessage(channel=run.channel, thread_ts=run.thread_ts, text=notice.text)
            except SlackApiError as exc:
                error = str(exc.response.get("error"))
                if error in CANNOT_POST:
                    log.warning("run %s: could not tell the thread about file %s (%s)", run.id, notice.file_id, error)
                    continue
                log.warning(
                    "run %s: telling the thread about file %s failed (%s); will retry", run.id, notice.file_id, error
                )
                await self.redis.srem(key, notice.file_id)
                ok = False
            except (TimeoutError, SlackClientError, OSError) as exc:
                log.warning(
                    "run %s: telling the thread about file %s failed (%s); will retry", run.id, notice.file_id, exc
                )
                await self.redis.srem(key, notice.file_id)
                ok = False
            else:
                log.info("run %s: told the thread it cannot open file %s", run.id, notice.file_id)
        return ok
