"""The team's desk: what research costs and when it is checked again.

Owns `usage`, the monthly budgets and their `budget …` command, and re-checks (the `recheck …`
commands, serve's sweep that shows re-check runs, the digest of what changed), and what is
forgotten (retention.py: the bot's keys under jobs/upkeep/retention.py's rules, `forget this thread`, the
deletions a deleted message, channel or an uninstall ask for). The records
themselves live in `jobs` (jobs/budgets/spend.py, jobs/upkeep/recheck.py); this package shows and changes them
from Slack. It may start a run through publishing's lifecycle; it must not know the listeners or
the command line.
"""
