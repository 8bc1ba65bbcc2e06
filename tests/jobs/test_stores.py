"""The engine's stores kept in Redis (jobs.records.stores): what one process writes, another reads back,
whichever way its connection decodes replies."""
from __future__ import annotations

import pytest
from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from agent.context.requestlog import RequestRecord
from agent.results import Locator, StoredResult
from jobs.records.stores import (
    RedisCheckpointStore,
    RedisRequestLog,
    RedisResultStore,
    load_request_body,
    load_request_records,
)

STEP = {"index": 0, "assistant": [{"type": "text", "text": "looking"}], "results": [], "extra": ["<budget>"]}


@pytest.mark.parametrize("decoded", [False, True], ids=["bytes", "decode_responses"])
async def test_a_checkpoint_written_by_one_worker_is_read_by_the_next(redis_url: str, decoded: bool) -> None:
    writer = AsyncRedis.from_url(redis_url)
    reader = AsyncRedis.from_url(redis_url, decode_responses=decoded)
    try:
        await RedisCheckpointStore(writer, "run1").save({"dropped": [], "n": 1}, {0: STEP, 1: {**STEP, "index": 1}})
        await RedisCheckpointStore(writer, "run1").save({"dropped": [0], "n": 2}, {})
        loaded = await RedisCheckpointStore(reader, "run1").load()
        assert loaded == ({"dropped": [0], "n": 2}, {1: {**STEP, "index": 1}}), "step 0 was summarised away"
        assert await RedisCheckpointStore(reader, "other").load() is None
        await RedisCheckpointStore(reader, "run1").clear()
        assert await RedisCheckpointStore(writer, "run1").load() is None
    finally:
        await writer.aclose()
        await reader.aclose()


async def test_a_stored_result_comes_back_by_id_within_its_run_only(redis_url: str) -> None:
    redis = AsyncRedis.from_url(redis_url)
    try:
        result = StoredResult(id="r_0001", kind="web_search", text="VTI 0.03% [s1]", locator=Locator(what="q"))
        await RedisResultStore(redis, "run1").put(result)
        assert await RedisResultStore(redis, "run1").get("r_0001") == result
        assert await RedisResultStore(redis, "run2").get("r_0001") is None
    finally:
        await redis.aclose()


async def test_inspect_reads_back_each_request_as_it_was_sent(redis_url: str) -> None:
    redis = AsyncRedis.from_url(redis_url)
    system = [{"type": "text", "text": "You research."}]
    first = {"model": "m", "system": system, "tools": [], "messages": [{"role": "user", "content": "q"}]}
    second = {**first, "messages": [*first["messages"], {"role": "assistant", "content": "a"}]}
    try:
        log = RedisRequestLog(redis, "run1")
        await log.record(RequestRecord(n=1, kind="turn", model="m"), first)
        await log.record(RequestRecord(n=2, kind="turn", model="m"), second)
    finally:
        await redis.aclose()
    cli = Redis.from_url(redis_url)
    records = load_request_records(cli, "run1")
    assert [r.n for r in records] == [1, 2]
    assert [load_request_body(cli, "run1", r) for r in records] == [first, second]


async def test_a_thread_s_seen_urls_are_inherited_by_its_next_run_and_refusals_are_kept_per_run(
        async_redis, redis: Redis) -> None:
    from agent.tools.seen_urls import normalise
    from jobs.records.stores import RedisSeenUrls, refused_fetches

    first = RedisSeenUrls(async_redis, "run1", "C1", "1700000000.000100")
    await first.add([normalise("https://fees.test/a"), normalise("https://fees.test/b")])
    await first.refused("https://evil.test/?d=x")
    follow_up = RedisSeenUrls(async_redis, "run2", "C1", "1700000000.000100")
    assert await follow_up.load() == {"https://fees.test/a", "https://fees.test/b"}
    assert await RedisSeenUrls(async_redis, "run3", "C1", "1700000000.000999").load() == set(), "another thread"
    assert refused_fetches(redis, "run1") == ["https://evil.test/?d=x"] and refused_fetches(redis, "run2") == []


async def test_bulky_records_are_stored_compressed_for_their_retention_and_older_plain_ones_still_read(
    redis_url: str, redis: Redis
) -> None:
    from jobs import keys

    connection = AsyncRedis.from_url(redis_url)
    page = "The fund's expense ratio is 0.03% as of 2024. " * 400
    body = {"model": "m", "system": "s", "tools": [], "messages": [{"role": "user", "content": page}]}
    try:
        result = StoredResult(id="r_0001", kind="page", text=page, locator=Locator(what="https://example.com"))
        await RedisResultStore(connection, "run1", ttl_seconds=3 * 86_400).put(result)
        await RedisRequestLog(connection, "run1", ttl_seconds=3 * 86_400).record(
            RequestRecord(n=1, kind="turn", model="m"), body)
        stored = redis.get(keys.result("run1", "r_0001"))
        assert stored.startswith(b"z1:") and len(stored) < len(page) / 5, "compressed"
        assert 2 * 86_400 < redis.ttl(keys.result("run1", "r_0001")) <= 3 * 86_400, "kept for the retention set"
        assert 2 * 86_400 < redis.ttl(keys.request_parts("run1")) <= 3 * 86_400
        assert all(v.startswith(b"z1:") for v in redis.hvals(keys.request_parts("run1")))
        assert await RedisResultStore(connection, "run1").get("r_0001") == result
        assert load_request_body(redis, "run1", load_request_records(redis, "run1")[0]) == body

        # A result written before compression (plain JSON) still reads.
        older = StoredResult(id="r_0002", kind="page", text="plain", locator=Locator(what="x"))
        redis.set(keys.result("run1", "r_0002"), older.model_dump_json())
        assert await RedisResultStore(connection, "run1").get("r_0002") == older
    finally:
        await connection.aclose()
