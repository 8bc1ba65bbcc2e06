# One image for both of the Procfile's process types: `deepthread serve` (the default command) and
# `deepthread worker` (run the image with the command `worker`). compose.yaml runs both, past one
# machine. Runs as an unprivileged user; SIGTERM stops either within 30 s (docs/operating.md).
# The base pinned by version and by digest (the multi-architecture index): a rebuild gets these exact
# bytes, not whatever the tag points at that day. Refresh both together (docs/operating.md, "Pinned
# versions"): docker buildx imagetools inspect python:3.11.14-slim-bookworm
FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# DejaVu Sans for exported PDFs (bot/publishing/export_pdf.py): Greek, Cyrillic, arrows, math signs;
# without it a PDF falls back to ReportLab's own Latin-only font.
RUN apt-get update && apt-get install -y --no-install-recommends fonts-dejavu-core && rm -rf /var/lib/apt/lists/*
# The locked releases first (every package pinned with its hashes), in a layer of their own that a
# change to the code does not rebuild; then the project without dependencies.
COPY requirements/app.txt ./requirements/app.txt
RUN pip install --require-hashes -r requirements/app.txt
COPY pyproject.toml README.md LICENSE ./
COPY agent ./agent
COPY jobs ./jobs
COPY bot ./bot
RUN pip install --no-deps . && useradd --system --uid 10001 --no-create-home --home-dir /app deepthread

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
