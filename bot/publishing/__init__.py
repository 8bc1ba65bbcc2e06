"""Publishing: a run's state made visible in Slack, and kept so.

Owns the publisher (follows the run-state stream, one writer per run through leases, coalescing),
rendering run state into the progress message, the pinned report, the native progress stream and
the assistant status, the spilled report file and chart files in the thread, and a run's start in
Slack (lifecycle) and the orphan sweep. Rendering is state-based and idempotent. It writes through
the Slack layer's rate-limited client; it must not know the listeners, the desk or the command
line (nothing here reacts to a person: it shows what jobs recorded).
"""
