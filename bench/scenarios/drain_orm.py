"""Drain 20,000 plain-function jobs that each do one Django ORM UPDATE, with 2 processes.

Each job updates one row of a 1,000-row table (`bench_row`, bench/rows.py) through the
ORM: `BenchRow.objects.filter(pk=row).update(hits=F("hits") + 1)`. The baseline is the
hand-written loop of bench/worker_baseline.py doing the same work by hand: claim a batch
of 100, one autocommit UPDATE per job on its connection, settle the batch.

Two fleets, as a Django user would run them:
- `drain_orm`: the project's settings as runworker applies them: each handler thread keeps
  its own Django connection between jobs (CONN_MAX_AGE 300, queue_engine/worker/cli.py),
  checked only when its socket says the server may have closed it
  (queue_engine/worker/handler_connections.py). A process has at most `--concurrency` handler
  threads, each with its connection: at the bench's usual 200, two processes could open
  400 connections, more than the server's 100, so this fleet runs 40 a process
  (ORM_CONCURRENCY).
- `drain_orm_pool`: JOBSITE_DB_POOL=1 (Django's psycopg pool, at most 20 connections a
  process). Each job's connection goes back to the pool when the job ends, so the fleet
  runs the bench's usual `--concurrency 200`, its threads sharing the pool's 20.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.harness import BenchEnv, per_second
from bench.jobs import ORM_KIND, QUEUE, ROWS, row_payloads
from bench.rows import CREATE_ROWS
from bench.workers import (
    CONCURRENCY,
    STATS_NOTE,
    baseline_timed,
    compare_many,
    fill_baseline,
    fill_ours,
    fleet,
    ours_timed,
)

NAME = "drain_orm"
N = 20_000
PROCESSES = 2
ORM_CONCURRENCY = 40
POOL_CONCURRENCY = CONCURRENCY  # the threads share jobsite/database.py's pool of 20
TARGET = 0.6  # of the baseline (issue 21)


def run(env: BenchEnv) -> list[dict[str, Any]]:
    with env.connect() as conn:
        for statement in CREATE_ROWS.strip().split(";\n"):
            conn.execute(statement.replace("%s", str(ROWS)))
    rows = []
    for name, concurrency, pool in (
        (NAME, ORM_CONCURRENCY, False),
        (f"{NAME}_pool", POOL_CONCURRENCY, True),
    ):
        with django_pool(pool), fleet(env, QUEUE, PROCESSES, concurrency) as workers:
            ours_s, base_s = compare_many(
                env,
                [
                    ours_timed(env, workers, fill_ours(N, ORM_KIND, payloads=row_payloads)),
                    baseline_timed(
                        env, QUEUE, PROCESSES, fill_baseline(env, N, row_payloads), handler="update"
                    ),
                ],
            )
        settings = (
            "JOBSITE_DB_POOL=1 (at most 20 connections a process, given back after each job)"
            if pool
            else "runworker's settings (a Django connection per handler thread, kept)"
        )
        rows.append(
            env.result(
                name,
                unit="jobs/s",
                samples=per_second(N, ours_s),
                baseline_samples=per_second(N, base_s),
                target=f">= {TARGET} of the baseline",
                target_ratio=TARGET,
                n=N,
                processes=PROCESSES,
                method=f"runworker --concurrency {concurrency} --processes {PROCESSES}, "
                f"{settings}; a plain def handler doing one ORM UPDATE of one of {ROWS:,} "
                "rows; time from un-pausing the queue until all jobs are in "
                "queue_engine_jobrecord" + STATS_NOTE,
                baseline_method="psycopg loop in 2 processes: claim 100 (FOR UPDATE SKIP "
                "LOCKED), one autocommit UPDATE of the job's row each, then delete the batch "
                "with the next claim",
            )
        )
    return rows


@contextmanager
def django_pool(on: bool) -> Iterator[None]:
    """The workers started in the block use Django's connection pool, or not."""
    before = os.environ.get("JOBSITE_DB_POOL")
    os.environ["JOBSITE_DB_POOL"] = "1" if on else "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("JOBSITE_DB_POOL", None)
        else:
            os.environ["JOBSITE_DB_POOL"] = before
