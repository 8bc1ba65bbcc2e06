"""A run's action token is in Redis only encrypted (jobs/records/sealing.py): whatever the token, no key of
the run holds it in any form Redis returns, it comes back whole to a process with the key, and a
process with no key stores nothing rather than the token in clear."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr
from redis import Redis

from jobs import Run, RunStore, keys
from jobs.records import sealing
from jobs.records.sealing import derived_key
from tests.redis_values import holding

TOKENS = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=80)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=TOKENS)
def test_no_key_in_redis_holds_the_action_token_and_the_run_gets_it_back(redis: Redis, sealing_key: str,
                                                                          token: str) -> None:
    store = RunStore(redis)
    run_id = store.create(Run(team="T1", channel="C1", thread_ts="1.0", question="q",
                              action_token=SecretStr(token))).run.id
    assert not holding(redis, token), "the token is readable in Redis"
    assert store.get(run_id).run.action_token == SecretStr(token)
    redis.delete(keys.action_token(run_id))


def test_without_a_key_the_token_is_not_stored_at_all(redis: Redis) -> None:
    sealing.configure(None)
    store = RunStore(redis)
    run_id = store.create(Run(channel="C1", thread_ts="1.0", question="q", action_token=SecretStr("xoxe-1-abc"))).run.id
    assert not redis.exists(keys.action_token(run_id))
    assert store.get(run_id).run.action_token is None


def test_a_token_sealed_under_another_key_does_not_open(redis: Redis, sealing_key: str) -> None:
    store = RunStore(redis)
    run_id = store.create(Run(channel="C1", thread_ts="1.0", question="q", action_token=SecretStr("xoxe-1-abc"))).run.id
    sealing.configure(derived_key("xoxb-some-other-deployment"))
    assert store.get(run_id).run.action_token is None, "a changed key loses the token, never misreads it"


@given(st.text(min_size=1, max_size=60), st.text(min_size=1, max_size=60))
def test_a_derived_key_is_a_fernet_key_that_differs_per_secret(one: str, two: str) -> None:
    assert (derived_key(one) == derived_key(two)) == (one == two)
    sealing.configure(derived_key(one))
    try:
        assert sealing.open_sealed(sealing.seal("t") or "") == "t"
    finally:
        sealing.configure(None)
