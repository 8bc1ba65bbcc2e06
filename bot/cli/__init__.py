"""The command line: `deepthread serve | worker | up | ask | doctor | inspect | eval`.

Owns the processes (serve with its publisher and sweeps, the RQ worker), reading the settings once,
the embedded redis-server of `deepthread up`, the terminal research of `ask` and the eval harness.
It is the top layer: it may assemble anything below it, and nothing imports it. It must not hold
Slack behaviour of its own: what a listener or the publisher does lives in their layers.
"""
