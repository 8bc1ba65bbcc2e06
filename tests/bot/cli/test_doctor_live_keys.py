"""`deepthread doctor --live` through the real command line says how many keys Redis holds, by
owner, and its used memory, and reports the keys left over (jobs/upkeep/key_audit.py): a key no module
owns, a mark that never expires; a real run and the deployment's records pass."""
from __future__ import annotations

from redis import Redis

from bot import keys as bot_keys
from jobs import Run, RunStore, keys
from tests.bot.cli.test_doctor_live import doctor_live, problems
from tests.fakes.anthropic import text_reply


def _keys_line(stdout: str) -> str:
    [line] = [line for line in stdout.splitlines() if line.startswith("Redis keys: ")]
    return line


def test_the_live_check_counts_the_keys_and_passes_a_real_run(fake_slack, fake_model, fake_web, redis_url) -> None:
    fake_model.policy = lambda request: text_reply("p")
    redis = Redis.from_url(redis_url)
    RunStore(redis).create(Run(question="q", team="T1", channel="C1", thread_ts="1.0"))
    redis.set(bot_keys.PUBLISHER_CURSOR, "0-1")  # a deployment record: kept for good, by design

    done = doctor_live(fake_slack, fake_model, fake_web, redis_url)

    assert done.returncode == 0, done.stdout + done.stderr
    line = _keys_line(done.stdout)
    assert line.startswith("Redis keys: 4 (runs 1, threads 1, deployment 2), used memory "), line
    assert line.endswith(" MB"), line


def test_the_live_check_reports_a_key_no_module_owns_and_a_mark_that_never_expires(
        fake_slack, fake_model, fake_web, redis_url) -> None:
    fake_model.policy = lambda request: text_reply("p")
    redis = Redis.from_url(redis_url)
    RunStore(redis).create(Run(question="q", team="T1", channel="C1", thread_ts="1.0"))
    redis.set(f"{keys.PREFIX}:mystery:123", "x")
    redis.set(keys.RETENTION_LEASE, "1")  # a lease with no TTL: the round would never run again

    done = doctor_live(fake_slack, fake_model, fake_web, redis_url)

    assert done.returncode == 1, done.stdout + done.stderr
    assert _keys_line(done.stdout).startswith("Redis keys: 5 (runs 1, threads 1, deployment 1, marks 1, unowned 1)")
    lines = problems(done)
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"Redis holds 1 RETENTION_LEASE mark that never expires (no TTL), e.g. "
                               f"{keys.RETENTION_LEASE}: "), lines
    assert lines[1].startswith(f"Redis holds 1 key no module owns, like {keys.PREFIX}:mystery:123 "
                               f"({keys.PREFIX}:mystery:*): "), lines
    assert "xargs redis-cli DEL" in lines[1] and "Traceback" not in done.stderr
