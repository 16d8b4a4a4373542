"""Claims of a limited queue side by side while its limits do not bind (issue 45, "limits at
full speed"): queue_engine_claim_rooms, sql.CLAIM's `side_by_side`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import psycopg
import pytest

from queue_engine import sql
from queue_engine.models import Job, JobRecord, QueueConfig
from queue_engine.sql.claim import SIDE_BY_SIDE_MOST, SIDE_BY_SIDE_SLOTS
from tests.support import jobs
from tests.support.history import most_in_a_window
from tests.support.sampler import Sampler
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow

CLAIM: dict[str, Any] = {
    **sql.NO_FLOORS,
    "all_queues": True,
    "queues": [],
    "labels": [],
    "worker": "w",
    "alone": False,
}


def taken(rows: list[tuple[Any, ...]]) -> set[int]:
    return {row[0] for row in rows if row[0] is not None}


def markers(rows: list[tuple[Any, ...]]) -> set[tuple[str, str]]:
    return {(row[1], row[2]) for row in rows if row[0] is None}


@pytest.fixture
def connections(conninfo: str) -> Iterator[list[psycopg.Connection]]:
    with ExitStack() as stack:
        yield [
            stack.enter_context(psycopg.connect(conninfo)) for _ in range(SIDE_BY_SIDE_SLOTS + 1)
        ]


def claim(conn: psycopg.Connection, token: int, limit: int) -> list[tuple[Any, ...]]:
    """A claim in the connection's open transaction, left open."""
    conn.execute("SET lock_timeout = '2s'")
    return conn.execute(sql.CLAIM, {**CLAIM, "token": token, "limit": limit}).fetchall()


def test_claimers_of_a_queue_whose_cap_does_not_bind_hold_it_at_once_within_the_cap(
    transactional_db: None, connections: list[psycopg.Connection]
) -> None:
    """Up to SIDE_BY_SIDE_SLOTS claims of a capped queue with room for them all run at
    once, none waiting for another's commit; each takes at most SIDE_BY_SIDE_MOST jobs
    and leaves the others' share, so together they stay under the cap. One claim more
    waits for a slot. Once they commit, the room left is too small to share: the next
    claim goes alone and fills the cap exactly."""
    cap = SIDE_BY_SIDE_SLOTS * SIDE_BY_SIDE_MOST + 4
    QueueConfig.objects.update_or_create(name="capped", defaults={"max_concurrency": cap})
    jobs.capped.enqueue_many([{"pause": 0}] * (cap + 100))
    *sharing, extra = connections

    claims = [claim(conn, token, limit=200) for token, conn in enumerate(sharing)]
    # One more: every slot is held, so it waits (here, past its lock_timeout).
    with pytest.raises(psycopg.errors.LockNotAvailable):
        claim(extra, 99, limit=200)
    extra.rollback()
    for conn in sharing:
        conn.commit()

    counts = [len(taken(rows)) for rows in claims]
    assert counts == [SIDE_BY_SIDE_MOST] * SIDE_BY_SIDE_SLOTS
    assert all(markers(rows) == {("side_by_side", "capped")} for rows in claims)
    ids = set().union(*(taken(rows) for rows in claims))
    assert len(ids) == SIDE_BY_SIDE_SLOTS * SIDE_BY_SIDE_MOST

    last = claim(extra, 100, limit=200)
    extra.commit()
    assert len(taken(last)) == cap - len(ids)
    assert ("limited", "capped") in markers(last)
    assert Job.objects.filter(queue="capped", state="running").count() == cap


def test_a_claim_side_by_side_leaves_the_share_of_those_on_their_way(
    transactional_db: None, connections: list[psycopg.Connection]
) -> None:
    """The room a claim guesses without a lock may be gone when it counts: a claim that
    guessed room to share counts, under its slot, room for less than every claimer's
    share, and takes only what leaves SIDE_BY_SIDE_SLOTS - 1 shares to the others."""
    cap = 300
    QueueConfig.objects.update_or_create(name="capped", defaults={"max_concurrency": cap})
    ids = jobs.capped.enqueue_many([{"pause": 0}] * 400)
    holder, one, other, *_ = connections

    holder.execute("SELECT pg_advisory_xact_lock(hashtextextended('queue_engine:queue:capped', 0))")
    done: list[list[tuple[Any, ...]]] = []
    waiting = threading.Thread(target=lambda: done.append(claim(one, 1, limit=200)))
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive()  # it guessed 300 of room, and waits for the lock
    other.execute(  # meanwhile, 100 jobs start
        "UPDATE queue_engine_job SET state = 'running', attempt = 1, lease_owner = 'x',"
        " claim_token = 1, started_at = now(), heartbeat_at = now(),"
        " lease_expires_at = now() + interval '1 hour' WHERE id = ANY(%s)",
        [ids[-100:]],
    )
    other.commit()
    holder.commit()
    waiting.join(5)
    one.commit()

    room = cap - 100 - (SIDE_BY_SIDE_SLOTS - 1) * SIDE_BY_SIDE_MOST
    assert len(taken(done[0])) == room
    assert ("side_by_side", "capped") in markers(done[0])


def test_a_queue_near_its_cap_is_claimed_alone(
    transactional_db: None, connections: list[psycopg.Connection]
) -> None:
    """Where the room guessed without a lock could not be shared, a claim holds the queue
    alone: a second claim waits for its commit, then counts what it took."""
    QueueConfig.objects.update_or_create(name="capped", defaults={"max_concurrency": 30})
    jobs.capped.enqueue_many([{"pause": 0}] * 50)
    one, two, *_ = connections

    first = claim(one, 1, limit=20)
    done: list[list[tuple[Any, ...]]] = []
    waiting = threading.Thread(target=lambda: done.append(claim(two, 2, limit=20)))
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive()  # it waits for the first claim's commit
    one.commit()
    waiting.join(5)
    two.commit()

    assert len(taken(first)) == 20 and len(taken(done[0])) == 10
    assert ("limited", "capped") in markers(first)


def test_claims_side_by_side_take_turns_on_a_key_they_share(
    transactional_db: None, connections: list[psycopg.Connection]
) -> None:
    """A queue with group caps alone is claimed side by side; two claims whose
    candidates share a key take turns on it (its bucket), so the second counts what the
    first took and the key's cap holds. A claim with other keys does not wait."""
    QueueConfig.objects.update_or_create(name="grouped", defaults={"group_concurrency": 2})
    jobs.grouped.enqueue_many([{"key": "a", "pause": 0}] * 6)
    one, two, three, *_ = connections

    first = claim(one, 1, limit=2)  # it reads and row-locks only as many candidates
    done: list[list[tuple[Any, ...]]] = []
    waiting = threading.Thread(target=lambda: done.append(claim(two, 2, limit=10)))
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive()  # its candidates are key a's next jobs: a's bucket is held
    jobs.grouped.enqueue_many([{"key": "other", "pause": 0}] * 2)
    assert bucket("a") != bucket("other")
    other = claim(three, 3, limit=10)  # a key whose bucket no claim holds: not blocked
    one.commit()
    waiting.join(5)
    two.commit()
    three.commit()

    assert len(taken(first)) == 2 and taken(done[0]) == set()
    assert ("side_by_side", "grouped") in markers(first)
    running = Job.objects.filter(queue="grouped", state="running")
    assert running.filter(group_key="a").count() == 2
    assert len(taken(other)) == 2


def bucket(key: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT hashtext(%s) & 63", [key])
        return int(cursor.fetchone()[0])


def test_a_cap_that_claims_share_holds_across_racing_processes(
    workers: Workers, executions: None, conninfo: str
) -> None:
    """Two processes of two lanes each, 400 slots, a cap of 300: while the running jobs
    leave room for every claimer, claims go side by side; near the cap, alone. The cap
    is never passed, and it is reached."""
    cap = 300
    QueueConfig.objects.update_or_create(name="slow", defaults={"max_concurrency": cap})
    ids = jobs.async_sleeper.enqueue_many([{"seconds": 0.2}] * 3000)
    query = "SELECT count(*) FROM queue_engine_job WHERE queue = 'slow' AND state = 'running'"

    with Sampler(conninfo, query) as sampler:
        for _ in range(2):
            workers.start("--queues", "slow", "--concurrency", "200")
        wait_for(lambda: JobRecord.objects.filter(pk__in=ids).count() == 3000, timeout=90)

    peaks = [n for (n,) in sampler.samples]
    assert cap - 20 <= max(peaks) <= cap, f"peak {max(peaks)} over {len(peaks)} samples"


def test_a_rate_limit_that_claims_share_holds_in_every_window(
    workers: Workers, executions: None
) -> None:
    """A rate limit large enough for claims side by side (each window starts with room
    for every claimer): no window of a second holds more starts than the limit."""
    limit = 400
    QueueConfig.objects.update_or_create(
        name="slow", defaults={"rate_limit": limit, "rate_window": 1}
    )
    ids = jobs.async_sleeper.enqueue_many([{"seconds": 0}] * (6 * limit))

    for _ in range(4):
        workers.start("--queues", "slow", "--concurrency", "100", "--poll-interval", "0.05")
    wait_for(lambda: JobRecord.objects.filter(pk__in=ids).count() == len(ids), timeout=60)

    starts = [
        s for s in JobRecord.objects.filter(pk__in=ids).values_list("started_at", flat=True) if s
    ]
    assert len(starts) == len(ids)
    assert most_in_a_window(starts, 1) <= limit
    assert (max(starts) - min(starts)).total_seconds() >= 5  # six windows' worth
