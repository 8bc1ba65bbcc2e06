"""What an operator sees of a process: its log lines and its metrics endpoint.

Log lines are text (the default) or JSON (`DEEPTHREAD_LOG_FORMAT=json`), one object a line with
the run id and workspace it is about (jobs.process.logcontext; null when none). No secret is ever
written: every configured secret's value is replaced before a line leaves the process, whatever
logged it (our code, an SDK, a traceback), and so is anything shaped like a Slack token or written
as the value of a token field (`action_token`, `access_token`, …): what arrives in a payload is
no configured secret, and log lines carry ids, never payloads (bot/slack/events.py's `malformed`).

Metrics (`DEEPTHREAD_METRICS_PORT`): the Prometheus text format at `/metrics` (any path), served
from a thread of serve or of the worker. RQ runs each job in a forked work-horse, so counters
live in prometheus_client's multiprocess files (a directory of the process's own, or the one
`deepthread up` shares with its worker), and the endpoint sums every process's, the horses'
that ended included. The run gauges are read from Redis at most once per GAUGES_CACHE_SECONDS,
however often it is scraped (jobs/upkeep/gauges.py). The endpoint is unauthenticated, so it listens on
loopback unless DEEPTHREAD_METRICS_HOST opens it (docs/security.md).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from typing import Any

from pydantic import SecretStr
from redis import Redis

from bot.settings import Settings
from jobs.process.logcontext import current_log_context

__all__ = ["JsonFormatter", "TextFormatter", "enable_metrics", "metrics_directory", "secrets_of", "setup_logging"]

MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own setting, set for it here
REDACTED = "[redacted]"
# Shorter values are not secrets worth hiding (and hiding them would garble ordinary words).
MIN_SECRET_CHARS = 6
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Secrets that are no setting: Slack's token shapes, and the value of any token field in a payload
# written into a line (a dict's repr or JSON), whatever its shape (an action token is digits and hex).
TOKEN_SHAPES = re.compile(r"\b(?:xox[abeoprs]|xapp)-[A-Za-z0-9-]{6,}|\bxoxe\.xox[a-z]-[A-Za-z0-9.-]{6,}")
TOKEN_FIELDS = re.compile(
    r"""(\b(?:action_token|access_token|refresh_token|bot_token|client_secret|signing_secret|token)"""
    r"""\\*["']?\s*[:=]\s*\\*["']?)([^"'\\\s,;&}\]]+)""",
)
# The SDKs log request details at DEBUG; keep them quiet so request bodies stay out of the log.
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "slack_sdk", "anthropic")


def secrets_of(settings: Settings) -> list[str]:
    values = [value.get_secret_value() for value in vars(settings).values() if isinstance(value, SecretStr)]
    return sorted({v for v in values if len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)


class _Redacting(logging.Formatter):
    def __init__(self, secrets: list[str], fmt: str | None = None) -> None:
        super().__init__(fmt)
        self.secrets = secrets

    def redact(self, line: str) -> str:
        for secret in self.secrets:
            if secret in line:
                line = line.replace(secret, REDACTED)
        line = TOKEN_SHAPES.sub(REDACTED, line)
        return TOKEN_FIELDS.sub(lambda m: f"{m.group(1)}{REDACTED}", line)


class TextFormatter(_Redacting):
    def __init__(self, secrets: list[str]) -> None:
        super().__init__(secrets, TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return self.redact(super().format(record))


class JsonFormatter(_Redacting):
    def format(self, record: logging.LogRecord) -> str:
        context = current_log_context()
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": self.redact(record.getMessage()),  # before encoding: its quotes are still plain
            "run_id": context.run_id,
            "team": context.team,
            "process": record.process,
        }
        if record.exc_info:
            line["exception"] = self.redact(self.formatException(record.exc_info))
        return self.redact(json.dumps(line, ensure_ascii=False, default=str))


def setup_logging(settings: Settings, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    secrets = secrets_of(settings)
    handler.setFormatter(JsonFormatter(secrets) if settings.log_format == "json" else TextFormatter(secrets))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)
    logging.captureWarnings(True)  # Python's warnings become log lines too (JSON when asked)
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)


def metrics_directory() -> str:
    """The multiprocess directory this process (and the work-horses it forks) write: the one it
    was given (`deepthread up` shares its own), else a fresh one removed at exit."""
    directory = os.environ.get(MULTIPROC_VARIABLE)
    if directory and os.path.isdir(directory):
        return directory
    directory = tempfile.mkdtemp(prefix="deepthread-metrics-")
    atexit.register(shutil.rmtree, directory, True)
    os.environ[MULTIPROC_VARIABLE] = directory
    return directory


def enable_metrics(settings: Settings, redis: Redis) -> int | None:
    """Serve the metrics on DEEPTHREAD_METRICS_PORT (None: not set, nothing served); the port."""
    directory = metrics_directory() if settings.metrics_port is not None else os.environ.get(MULTIPROC_VARIABLE)
    if directory:
        from prometheus_client import values

        # Before any metric exists (jobs.process.metrics makes them on first use): values live in files.
        values.ValueClass = values.MultiProcessValue()
    if settings.metrics_port is None:
        return None
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    from jobs.upkeep.gauges import RunsCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)
    registry.register(RunsCollector(redis, settings.model_limits()))
    try:
        start_http_server(settings.metrics_port, addr=settings.metrics_host, registry=registry)
    except OSError as exc:
        logging.getLogger(__name__).error(
            "DEEPTHREAD_METRICS_PORT %s cannot be served on %s (%s): give each serve and worker process on this "
            "host a port of its own, or unset it (DEEPTHREAD_METRICS_HOST: an address of this host)",
            settings.metrics_port,
            settings.metrics_host,
            exc.strerror or type(exc).__name__,
        )
        raise SystemExit(2) from None
    logging.getLogger(__name__).info("metrics are served on %s port %s", settings.metrics_host, settings.metrics_port)
    return settings.metrics_port
