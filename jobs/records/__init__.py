"""The Run record and run state in Redis, with one owner each: the Run and the state the publisher
renders, RunEvents applied to it, the store with its versioned, forward-only, fenced writes and the
stream that announces every change, the action token sealed at rest, the engine's stores kept in
Redis (results, checkpoints, the request log, seen URLs), continuation runs and their threads, and
the verdicts on finished reports.

Above `control` (a worker's writes are fenced by its lease), `keyspace` and `process`; must not
import `budgets`, `lifecycle`, `upkeep` or `workers`: records know nothing of what a run costs, how
it is queued or swept."""
