"""The context the model sees: the history as steps, and its projection into each request.

Owns the history (history.py), elision (elision.py, stubs.py), compaction (compaction.py),
the pinned region (pinned.py), token estimates (tokens.py), the request log (requestlog.py),
and the manager that applies them before every request (manager.py).

Knows nothing of the tools (a result is a record with a tool's name and text), of the budget
ledger (the manager is told by a callable whether it may summarise) or of where a run is
stored (the request log's Redis version is jobs/records/stores.py).
"""
