"""Drain 20,000 queued no-op jobs with 1 and with 2 worker processes.

Ours: the jobs are enqueued in bulk into the paused queue "bench", `manage.py runworker
--queues bench --concurrency 200 [--processes 2]` starts and registers, then the queue
is un-paused (with a resume notification) and the time runs until all 20,000 are in
the history table. `drain` runs `async def` handlers (the headline), with 1 and with 2
processes; `drain_sync` runs plain-function ones (in the worker's handler threads), with 2. The
baseline is the hand-written loop of bench/worker_baseline.py in as many processes,
batches of 100, on its own table; with 2 processes, the async runs, the plain-function
runs and the baseline's take turns, and both lines are set against the same baseline.
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.harness import BenchEnv, per_second
from bench.jobs import ASYNC_KIND, KIND, QUEUE
from bench.worker_baseline import BATCH
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

NAME = "drain"
N = 20_000
TARGETS = {1: 25_000, 2: 40_000}  # jobs/s, async handlers
SYNC_OF_ASYNC = 0.6  # plain functions, as a share of the async line (issue 21)


def run(env: BenchEnv) -> list[dict[str, Any]]:
    rows = []
    with fleet(env, QUEUE, processes=1) as workers:
        ours_s, base_s = env.compare(
            ours_timed(env, workers, fill_ours(N, ASYNC_KIND)),
            baseline_timed(env, QUEUE, 1, fill_baseline(env, N)),
        )
        rows.append(result(env, NAME, ASYNC_KIND, 1, ours_s, base_s))
    # Two processes: async, plain-function and the baseline, in rotating order.
    with fleet(env, QUEUE, processes=2) as workers:
        ours_s, sync_s, base_s = compare_many(
            env,
            [
                ours_timed(env, workers, fill_ours(N, ASYNC_KIND)),
                ours_timed(env, workers, fill_ours(N, KIND)),
                baseline_timed(env, QUEUE, 2, fill_baseline(env, N)),
            ],
        )
        rows.append(result(env, NAME, ASYNC_KIND, 2, ours_s, base_s))
        rows.append(result(env, f"{NAME}_sync", KIND, 2, sync_s, base_s, async_s=ours_s))
    return rows


def result(
    env: BenchEnv,
    scenario: str,
    kind: str,
    processes: int,
    ours_s: list[float],
    base_s: list[float],
    async_s: list[float] | None = None,
) -> dict[str, Any]:
    handler = "async def" if kind == ASYNC_KIND else "plain def (run in the worker's threads)"
    if async_s is None:
        target: float = TARGETS[processes]
        target_text = f">= {target} jobs/s"
    else:
        # Plain functions against async handlers on the same fleet, in the same run.
        target = SYNC_OF_ASYNC * statistics.median(per_second(N, async_s))
        target_text = f">= {SYNC_OF_ASYNC} of drain's async line in the same run"
    return env.result(
        scenario,
        unit="jobs/s",
        samples=per_second(N, ours_s),
        baseline_samples=per_second(N, base_s),
        target=target_text,
        target_value=target,
        n=N,
        processes=processes,
        method=f"runworker --concurrency {CONCURRENCY}"
        + (f" --processes {processes}" if processes > 1 else "")
        + f", {handler} no-op handler; time from un-pausing the queue until all {N:,} jobs are "
        "in queue_engine_jobrecord (polled every 20 ms); the workers start once and serve "
        "every run" + STATS_NOTE,
        baseline_method=f"psycopg loop in {processes} process(es): one transaction per round "
        f"deletes the previous batch and claims the next {BATCH} (FOR UPDATE SKIP LOCKED + "
        "UPDATE .. RETURNING); time until its table is empty (polled every 20 ms); its table "
        "analyzed after each fill",
    )
