"""5,000 jobs that fail their first two attempts and succeed on the third, retried at
once (Backoff.fixed(0)), with 2 worker processes against 2 baseline processes.

The figure is completed jobs per second, every attempt inside the time: 5,000 jobs are
15,000 attempts. Ours: kind bench.flaky (async, raises on attempts 1 and 2); each failed
attempt goes back to available with its error (and traceback) appended. The baseline's
loop puts a failed job back (state, attempt, run_at) in the transaction of its next claim.
"""

from __future__ import annotations

from typing import Any

from bench.harness import BenchEnv, per_second
from bench.jobs import FLAKY_FAILURES, FLAKY_KIND, QUEUE
from bench.worker_baseline import BATCH
from bench.workers import (
    CONCURRENCY,
    COUNT_SUCCEEDED,
    STATS_NOTE,
    baseline_timed,
    fill_baseline,
    fill_ours,
    fleet,
    ours_timed,
)

NAME = "retry_storm"
N = 5_000
PROCESSES = 2
TARGET = 0.4  # of the baseline (issue 21)


def run(env: BenchEnv) -> list[dict[str, Any]]:
    with fleet(env, QUEUE, PROCESSES) as workers:
        ours_s, base_s = env.compare(
            ours_timed(env, workers, fill_ours(N, FLAKY_KIND), count=COUNT_SUCCEEDED),
            baseline_timed(env, QUEUE, PROCESSES, fill_baseline(env, N), handler="flaky"),
        )
    attempts = N * (FLAKY_FAILURES + 1)
    return [
        env.result(
            NAME,
            unit="jobs/s",
            samples=per_second(N, ours_s),
            baseline_samples=per_second(N, base_s),
            target=f">= {TARGET} of the baseline",
            target_ratio=TARGET,
            n=N,
            processes=PROCESSES,
            attempts=attempts,
            attempts_per_second=round(attempts / sorted(ours_s)[len(ours_s) // 2], 1),
            method=f"runworker --concurrency {CONCURRENCY} --processes {PROCESSES}, async kind "
            f"failing attempts 1-{FLAKY_FAILURES} (RuntimeError), Backoff.fixed(0); time from "
            f"un-pausing the queue until {N:,} jobs succeeded (in queue_engine_jobrecord)"
            + STATS_NOTE,
            baseline_method=f"psycopg loop in {PROCESSES} processes, batches of {BATCH}: a failed "
            "job is put back (state available, attempt + 1, run_at now()) and the finished ones "
            "deleted in the transaction of the next claim; time until its table is empty (its "
            "table analyzed after each fill)",
        )
    ]
