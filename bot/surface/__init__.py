"""The Slack surface: the Bolt app, HTTP mode's server, and the listeners for what people do.

Owns turning a Slack event into an action on a run: a mention starts one, a thread reply steers or
continues it, a reaction or button stops or upgrades it, a command answers about spend. The rules
for who may do what live in `steering`. It may use the desk, publishing and the Slack client; it
must not know how a message is rendered or kept in step (that is publishing's) and it must not
import the command line.
"""
