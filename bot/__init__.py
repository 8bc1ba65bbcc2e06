"""The Slack surface of Deepthread: everything that talks to Slack, and the command line.

It knows how a run looks in Slack, never how the agent thinks (it uses `agent` only through its
exports) nor how run state is stored (it asks `jobs`). Its packages are layers; each imports only
the layers below it (tests/bot/test_layers.py holds the rule):

    cli          the `deepthread` command: serve, worker, up, ask, doctor, inspect, eval
     └ surface   the Bolt app and its listeners: what a person in Slack can do to a run
        └ desk   the team's desk: spend, monthly budgets, re-checks and their digests
           └ publishing   run state → Slack messages: the publisher, renderers, streams, files
              └ slack     Slack's Web API as we use it: the rate-limited client, mrkdwn, events
                 └ settings, services, keys, exceptions, limits   (the ground every layer stands on)
"""
