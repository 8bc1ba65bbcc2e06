"""Who does a run's work, and how a run is told to stop: the lease with its fencing token that one
holder at a time carries (a holder that loses it stops at once), the stops, upgrades and notes the
bot records and announces, the subscription through which a waiting run hears of them, and the hard
stop's deadline that whichever process is alive carries out.

Above `keyspace` and `process`, which it uses; must not import the run records (`records`) or
anything above them: a stop is recorded by run id and reaches the loop through the engine's
control protocol (agent.control)."""
