"""A run's life as the bot asks for it: `Runs`/`AsyncRuns` (start, launch, stop, upgrade, note,
continue, approve a plan), the run's job on the RQ queue with a timeout from its budget, plan first
(the job that drafts a plan and the plan's life until someone approves it), and what a job is given
to do its work (the JobRuntime set at start-up, the model client with the shared limiter).

Above `budgets`, `records`, `control`, `process` and `keyspace`; must not import `upkeep` or
`workers`: the bot's requests never wait on a sweep or a worker process."""
