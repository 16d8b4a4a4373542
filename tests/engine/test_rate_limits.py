"""Rate limits: no window as long as the queue's rate window ever holds more starts than
its limit, counted from the jobs' own start times, whatever the claims race with."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any

import psycopg
import pytest

from bench.windows import most_in_a_window
from queue_engine import sql
from queue_engine.models import GroupLimit, Job, JobRecord, QueueConfig
from tests.support import jobs
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow

CLAIM: dict[str, Any] = {
    **sql.NO_FLOORS,
    "all_queues": False,
    "labels": [],
    "worker": "w",
    "alone": False,
}


def started(model: Any, **filters: Any) -> list[datetime]:
    return [s for s in model.objects.filter(**filters).values_list("started_at", flat=True) if s]


def test_a_claim_that_waited_for_the_queues_lock_counts_from_its_jobs_starts(
    transactional_db: None, conninfo: str
) -> None:
    """A claim's transaction begins before its turn on the queue's lock; its jobs start
    when it has the turn. Counted from the transaction's start, its jobs dropped out of
    the window while still inside it, and the next claim took a whole budget more."""
    QueueConfig.objects.update_or_create(
        name="capped", defaults={"rate_limit": 3, "rate_window": 2}
    )
    jobs.capped.enqueue_many([{"pause": 0}] * 6)
    lock = "queue_engine:queue:capped"

    def claim(conn: psycopg.Connection[Any], token: int) -> int:
        with conn.transaction():
            rows = conn.execute(
                sql.CLAIM, {**CLAIM, "queues": ["capped"], "token": token, "limit": 3}
            ).fetchall()
        return sum(1 for row in rows if row[0] is not None)

    with (
        psycopg.connect(conninfo, autocommit=True) as holder,
        psycopg.connect(conninfo, autocommit=True) as first,
        psycopg.connect(conninfo, autocommit=True) as second,
    ):
        with holder.transaction():
            holder.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [lock])
            waiting = threading.Thread(target=claim, args=(first, 1))
            waiting.start()
            time.sleep(1.0)  # the first claim waits its turn for a second
        waiting.join()
        time.sleep(1.5)  # past two seconds after its transaction began, not after its starts
        late = claim(second, 2)

    assert late == 0
    assert most_in_a_window(started(Job, queue="capped"), 2) == 3


def test_rate_limit_holds_in_every_window_across_racing_processes(
    workers: Workers, executions: None
) -> None:
    QueueConfig.objects.update_or_create(
        name="capped", defaults={"rate_limit": 4, "rate_window": 1}
    )
    ids = jobs.capped.enqueue_many([{"pause": 0}] * 80)

    for _ in range(4):
        workers.start("--queues", "capped", "--concurrency", "6", "--poll-interval", "0.05")
    wait_for(lambda: JobRecord.objects.filter(pk__in=ids).count() == 80, timeout=60)

    starts = started(JobRecord, pk__in=ids)
    assert len(starts) == 80
    assert most_in_a_window(starts, 1) <= 4
    assert (max(starts) - min(starts)).total_seconds() >= 19  # twenty windows at least


def test_a_per_key_rate_limit_gives_each_key_its_own_budget(
    workers: Workers, executions: None
) -> None:
    QueueConfig.objects.update_or_create(
        name="grouped", defaults={"rate_limit": 3, "rate_window": 1, "rate_limit_per_key": True}
    )
    GroupLimit.objects.create(queue="grouped", group_key="wide", rate_limit=6)
    busy = jobs.grouped.enqueue_many([{"key": "busy", "pause": 0}] * 24)
    wide = jobs.grouped.enqueue_many([{"key": "wide", "pause": 0}] * 24)
    small = jobs.grouped.enqueue_many([{"key": f"k{i}", "pause": 0} for i in range(5)] * 3)
    keyless = jobs.grouped.enqueue_many([{"key": None, "pause": 0}] * 9)
    ids = busy + wide + small + keyless

    for _ in range(3):
        workers.start("--queues", "grouped", "--concurrency", "8", "--poll-interval", "0.05")
    wait_for(lambda: JobRecord.objects.filter(pk__in=ids).count() == len(ids), timeout=60)

    by_key: dict[str | None, list[datetime]] = {}
    for key, start in JobRecord.objects.filter(pk__in=ids).values_list("group_key", "started_at"):
        assert start is not None
        by_key.setdefault(key, []).append(start)
    budgets = {key: 6 if key == "wide" else 3 for key in by_key}  # None: the keyless share 3
    assert {key: most_in_a_window(s, 1) for key, s in by_key.items()} == budgets
    # The busy key's backlog (eight windows of it) takes nothing from the others: the
    # small keys start in their first window, the wide key runs at its own rate.
    first = min(min(starts) for starts in by_key.values())
    small_done = max(max(by_key[f"k{i}"]) for i in range(5))
    assert (small_done - first).total_seconds() < 1
    wide_took, busy_took = (max(by_key[k]) - first for k in ("wide", "busy"))
    assert wide_took < busy_took / 1.5


def test_a_worker_claims_again_when_the_window_frees_room_not_at_its_next_poll(
    workers: Workers, executions: None
) -> None:
    QueueConfig.objects.update_or_create(
        name="capped", defaults={"rate_limit": 2, "rate_window": 1}
    )
    ids = jobs.capped.enqueue_many([{"pause": 0}] * 8)

    workers.start("--queues", "capped", "--concurrency", "4", "--poll-interval", "30")
    wait_for(
        lambda: JobRecord.objects.filter(pk__in=ids).count() == 8,
        timeout=15,
        message="the rate-limited jobs to run a window apart, not a poll apart",
    )

    starts = started(JobRecord, pk__in=ids)
    assert most_in_a_window(starts, 1) == 2
    assert (max(starts) - min(starts)).total_seconds() < 5
