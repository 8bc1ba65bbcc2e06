# One image for both of the Procfile's process types: `deepthread serve` (the default command) and
# `deepthread worker` (run the image with the command `worker`). compose.yaml runs both, past one
# machine. Runs as an unprivileged user; SIGTERM stops either within 30 s (docs/operating.md).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY agent ./agent
COPY jobs ./jobs
COPY bot ./bot
RUN pip install . && useradd --system --uid 10001 --no-create-home --home-dir /app deepthread

USER deepthread
# serve: Slack's events (HTTP mode) and /healthz, /readyz; a worker's health endpoints listen on
# DEEPTHREAD_HEALTH_PORT when it is set.
ENV PORT=3000
EXPOSE 3000
STOPSIGNAL SIGTERM
# Liveness of serve; compose.yaml gives workers their own check.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '3000'), timeout=4)"
ENTRYPOINT ["deepthread"]
CMD ["serve"]
