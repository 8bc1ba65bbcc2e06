"""A run's charts as PNG files in its thread: one file per chart, replaced when the chart is redrawn.

The worker draws a chart and stores its PNG in the run's result store (agent/tools/chart.py);
run state lists each chart's latest version. Here each new version is uploaded to the thread
and the previous version's file deleted, the same way spill.py keeps the full report's file:
upload first, then delete (the thread is never without the chart), failed deletes retried on
the next sync, setup errors (missing files:write, …) remembered and tried again much later.

What was uploaded lives in the publisher's own record, a Redis hash per pinned report message,
`deepthread:charts:{channel}:{report_ts}`, field `{run_id}:{chart_id}` → ChartFile. Keyed by
run too: a continuation edits the same report but numbers its charts afresh.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pydantic import BaseModel, ValidationError
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.web.async_client import AsyncWebClient

from agent import MARKER_RE, Chart, load_png
from bot import keys
from jobs import RunState
from jobs.keyspace.connection import text
from jobs.records.stores import RedisResultStore

from .spill import RECORD_TTL_SECONDS, SETUP_ERROR_RETRY_SECONDS
from .thread_files import ThreadFiles, adopt_legacy

__all__ = ["ChartFile", "ChartFiles", "ChartsOutcome"]

log = logging.getLogger(__name__)

ALT_TEXT_CHARS = 900  # the image's description for screen readers: the table, as written
COMMENT_TITLE_CHARS = 120


class ChartFile(BaseModel):
    """One chart's file in the thread, as the publisher last left it."""

    chart_id: str
    version: int
    file_id: str = ""
    permalink: str = ""
    uploaded_at: float = 0.0
    error: str = ""  # a setup error Slack gave for version `failed_version` (the file above stays)
    error_at: float = 0.0
    failed_version: int = 0


@dataclass
class ChartsOutcome:
    ok: bool = True  # False: a retry later is worthwhile
    links: dict[str, str] = field(default_factory=dict)  # Chart.key → permalink of its current file
    wake_at: float | None = None  # epoch seconds when a deferred upload is due


def _alt_text(chart: Chart) -> str:
    values = ", ".join(
        " ".join(p for p in (row.label, row.series) if p) + f": {_strip_markers(row.value)}" for row in chart.rows
    )
    return f"{chart.title} ({chart.y_label}). {values}"[:ALT_TEXT_CHARS]


def _strip_markers(value: str) -> str:
    return " ".join(MARKER_RE.sub("", value).split())


class ChartFiles:
    def __init__(self, redis: AsyncRedis, client: AsyncWebClient) -> None:
        self.redis = redis
        self.client = client
        self.files = ThreadFiles(redis, client, "chart file", RECORD_TTL_SECONDS)

    async def records(self, team: str | None, channel: str, report_ts: str) -> dict[str, ChartFile]:
        key = keys.charts(team, channel, report_ts)
        await adopt_legacy(self.redis, key, keys.legacy_charts(channel, report_ts))
        out: dict[str, ChartFile] = {}
        for name, raw in (await self.redis.hgetall(key)).items():
            try:
                out[text(name)] = ChartFile.model_validate_json(raw)
            except ValidationError:
                continue  # a record this version cannot read is re-uploaded, not fatal
        return out

    async def sync(self, state: RunState, now: float) -> ChartsOutcome:
        """Upload every chart version the thread does not show yet; say where each chart is."""
        run = state.run
        outcome = ChartsOutcome()
        if not run.channel or not run.report_message or not state.charts:
            return outcome
        channel, ts = run.channel, run.report_message
        records = await self.records(run.team, channel, ts)
        await self.files.retry_remembered(run.team, channel, keys.charts_stale(run.team, channel, ts))
        for chart in state.charts:
            name = chart.key(run.id)
            record = records.get(name)
            # Shown already (or a newer version is: this state was read late).
            if record is not None and record.file_id and record.version >= chart.version:
                outcome.links[name] = record.permalink
                continue
            if (
                record is not None
                and record.error
                and record.failed_version == chart.version
                and now - record.error_at < SETUP_ERROR_RETRY_SECONDS
            ):
                if record.file_id:  # the previous version's file is still there: better than no link
                    outcome.links[name] = record.permalink
                due = record.error_at + SETUP_ERROR_RETRY_SECONDS
                outcome.wake_at = due if outcome.wake_at is None else min(outcome.wake_at, due)
                continue
            uploaded = await self._upload(state, chart, record, now)
            if uploaded is None:
                outcome.ok = False
            elif uploaded.file_id:
                outcome.links[name] = uploaded.permalink
            if uploaded is not None and uploaded.error:
                due = now + SETUP_ERROR_RETRY_SECONDS
                outcome.wake_at = due if outcome.wake_at is None else min(outcome.wake_at, due)
        return outcome

    async def _upload(self, state: RunState, chart: Chart, previous: ChartFile | None, now: float) -> ChartFile | None:
        """The new record (file id set, or a setup error), or None when a retry later is worthwhile."""
        run = state.run
        channel, ts = run.channel or "", run.report_message or ""
        png = await load_png(RedisResultStore(self.redis, chart.drawn_by(run.id)), chart.blob_id)
        if png is None:  # expired with its run's results: nothing to upload, and nothing a retry brings back
            log.warning("run %s: the PNG of %s v%d is gone; not uploaded", run.id, chart.chart_id, chart.version)
            return ChartFile(chart_id=chart.chart_id, version=chart.version)
        section = state.section(chart.section_id)
        where = f" · illustrates “{section.title[:COMMENT_TITLE_CHARS]}” in the pinned report" if section else ""
        updated = f" (updated: version {chart.version})" if chart.version > 1 else ""
        upload = await self.files.upload(
            run.id,
            run.team,
            urgent=state.status.finished,
            channel=channel,
            thread_ts=run.thread_ts,
            filename=f"deepthread-{chart.drawn_by(run.id)}-{chart.chart_id}-v{chart.version}.png",
            content=png,
            title=chart.title,
            alt_txt=_alt_text(chart),
            initial_comment=f"📊 {chart.title[:COMMENT_TITLE_CHARS]}{updated}{where}",
        )
        if upload.setup_error:
            record = (previous or ChartFile(chart_id=chart.chart_id, version=0)).model_copy(
                update={"error": upload.setup_error, "error_at": now, "failed_version": chart.version}
            )
            await self._remember(run.team, channel, ts, chart.key(run.id), record)
            return record
        if not upload.file_id:
            return None
        record = ChartFile(
            chart_id=chart.chart_id,
            version=chart.version,
            file_id=upload.file_id,
            permalink=upload.permalink,
            uploaded_at=now,
        )
        await self._remember(run.team, channel, ts, chart.key(run.id), record)
        if previous is not None and previous.file_id and previous.file_id != record.file_id:
            await self.files.delete_or_remember(
                run.team, channel, keys.charts_stale(run.team, channel, ts), previous.file_id
            )
        return record

    async def _remember(self, team: str | None, channel: str, ts: str, name: str, record: ChartFile) -> None:
        key = keys.charts(team, channel, ts)
        await self.redis.hset(key, name, record.model_dump_json())
        await self.redis.expire(key, RECORD_TTL_SECONDS)
