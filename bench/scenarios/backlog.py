"""A big backlog drained by 2 processes: does the rate hold to the end?

N async no-op jobs are enqueued into the paused queue (enqueue_many, FILL_CHUNK per
transaction), the live table analyzed, then `runworker --concurrency 200 --processes
2` drains them from the un-pause. The rate over the first 10% of the jobs (from the
un-pause to the finish of the N/10-th) is the baseline; the rate over the last 10%
(from the finish of the 0.9*N-th to the last) is the value. A rate that sinks as the
live table fills with dead rows and its indexes with dead entries shows as a ratio
under 1. Each decile's rate is reported too, with the live table's size, its indexes'
size and its dead rows before and after the drain (pg_stat_user_tables, read after
the statistics are flushed).
"""

from __future__ import annotations

import itertools
import statistics
import time
from dataclasses import dataclass
from typing import Any

from bench.harness import BenchEnv, log, timer
from bench.jobs import QUEUE, async_noop
from bench.workers import (
    CONCURRENCY,
    POLL,
    TIMEOUT,
    configure_queue,
    fleet,
    resume,
    wait_until,
)

NAME = "backlog"
N = 1_000_000
PROCESSES = 2
FILL_CHUNK = 50_000
TARGET = 0.9  # last 10% at least this share of the first 10%'s rate
PAYLOAD = {"to": "user@example.com", "subject": "backlog"}

ANY_AVAILABLE = (
    "SELECT EXISTS (SELECT 1 FROM queue_engine_job WHERE state = 'available' AND queue = %s)"
)
COUNT_RECORDS = "SELECT count(*) FROM queue_engine_jobrecord"
# The finish times that bound each decile of the jobs (the k*N/10-th finish, k = 1..10).
DECILES = """
SELECT percentile_disc(ARRAY[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
       WITHIN GROUP (ORDER BY finished_at)
  FROM queue_engine_jobrecord
"""
TABLE_STATE = """
SELECT pg_relation_size('queue_engine_job'), pg_indexes_size('queue_engine_job'),
       n_live_tup, n_dead_tup
  FROM pg_stat_user_tables WHERE relid = 'queue_engine_job'::regclass
"""


@dataclass
class Drain:
    rates: list[float]  # jobs/s over each tenth of the jobs
    before: dict[str, int]  # the live table, filled
    after: dict[str, int]  # and drained
    seconds: float


def run(env: BenchEnv) -> list[dict[str, Any]]:
    runs: list[Drain] = []
    with fleet(env, QUEUE, processes=PROCESSES) as workers:
        for _ in range(env.repeats):
            env.truncate()
            configure_queue(env, QUEUE, paused=True)
            filling = timer()
            fill(N)
            log(f"  filled {N:,} jobs in {filling():.1f} s")
            with env.connect() as conn:
                conn.execute("ANALYZE queue_engine_job")
                before = table_state(conn)
                started_at = conn.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
                resume(conn, QUEUE)
                draining = timer()
                deadline = time.monotonic() + TIMEOUT * 5
                while conn.execute(ANY_AVAILABLE, [QUEUE]).fetchone()[0]:  # type: ignore[index]
                    workers.check_alive()
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the backlog did not drain{workers.tail()}")
                    time.sleep(POLL * 25)
                wait_until(conn, COUNT_RECORDS, lambda c: c >= N, what=f"{N} history rows")
                seconds = draining()
                bounds = conn.execute(DECILES).fetchone()[0]  # type: ignore[index]
                after = table_state(conn)
            edges = [started_at, *bounds]
            rates = [N / 10 / (b - a).total_seconds() for a, b in itertools.pairwise(edges)]
            log(
                f"  drained in {seconds:.1f} s; first 10% {rates[0]:,.0f} jobs/s, last 10% "
                f"{rates[-1]:,.0f}; live table {before} -> {after}"
            )
            runs.append(Drain(rates, before, after, seconds))
    env.truncate()
    last = [r.rates[-1] for r in runs]
    first = [r.rates[0] for r in runs]
    return [
        env.result(
            NAME,
            unit="jobs/s",
            samples=last,
            baseline_samples=first,
            target=f"last 10% >= {TARGET} of the first 10%'s rate",
            target_ratio=TARGET,
            n=N,
            decile_rates=[round(statistics.median(r.rates[k] for r in runs), 1) for k in range(10)],
            drain_s=[round(r.seconds, 1) for r in runs],
            live_table_before=runs[-1].before,
            live_table_after=runs[-1].after,
            method=f"runworker --concurrency {CONCURRENCY} --processes {PROCESSES}, async no-op "
            f"kind; {N:,} jobs enqueued (enqueue_many, {FILL_CHUNK:,} a transaction) into the "
            "paused queue, the live table analyzed, then un-paused; value = jobs/s over the "
            "last 10% of the finishes",
            baseline_method="the same drain's rate over its first 10% (from the un-pause)",
        )
    ]


def fill(n: int) -> None:
    from django.db import transaction

    for start in range(0, n, FILL_CHUNK):
        with transaction.atomic():
            async_noop.enqueue_many([PAYLOAD] * min(FILL_CHUNK, n - start))


def table_state(conn: Any) -> dict[str, int]:
    """The live table's heap and index sizes (MB) and its live and dead rows, with the
    statistics of every backend flushed (they are sent at most once a second)."""
    time.sleep(1.1)
    conn.execute("SELECT pg_stat_clear_snapshot()")
    heap, indexes, live, dead = conn.execute(TABLE_STATE).fetchone()
    return {
        "heap_mb": round(heap / 2**20),
        "indexes_mb": round(indexes / 2**20),
        "live_rows": int(live),
        "dead_rows": int(dead),
    }
