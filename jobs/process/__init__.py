"""What one process of jobs/ runs beside its work: the Prometheus metrics it counts, which run a
log line is about, background loops beside a piece of work (a lease renewed while it goes on), the
one event loop a worker's runs share and how late it runs, and the runs it carries right now (to
hand back at shutdown).

Knows nothing of runs' records or Redis keys: must not import any other package of jobs/ (only
`jobs.exceptions`), nor `bot`."""
