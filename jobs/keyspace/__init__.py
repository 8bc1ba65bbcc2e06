"""Redis as every process of a deployment reaches it: the connection made from `REDIS_URL`
(Sentinel, timeouts, the retry window, writes that must land on the primary), the name and lifetime
of every key run state uses (after the deployment's prefix), and the records named before keys had
a team, moved under their team once.

The bottom of jobs/ beside `process`: must not import any other package of jobs/ (only
`jobs.exceptions`), nor `bot` or the engine. Everyone above asks `keys` for a name and `connection` for a
client; nobody spells a key or opens a Redis client by hand."""
