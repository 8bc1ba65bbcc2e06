"""Work on runs that nobody asked for just now: finding runs whose worker died and queueing them
again, what is kept for how long and how it is forgotten (the maintenance round, `forget`), the key
audit of `doctor --live`, scheduled re-checks of a thread's report, and the run gauges read from
Redis when metrics are scraped.

Above `lifecycle` (a sweep stops or re-queues runs through the same API the bot uses) and everything
below it; must not import `workers`: a sweep runs in any process, serve included."""
