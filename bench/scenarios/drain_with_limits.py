"""Drain 20,000 jobs (2 worker processes) with every kind of limit set, beside a plain
drain measured in the same run by the same workers.

Limits: a fleet-wide cap (max_concurrency=150, below the 2 x 200 slots, so it binds), a
rate limit too large to bind by itself (1,000,000 per 60 s, but counted on every claim),
and group caps (group_concurrency=10) over 100 group keys the jobs are spread across.
The ratio to the plain drain is the cost of the limits; the target is >= 0.7.
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.harness import BenchEnv, per_second
from bench.jobs import ASYNC_KIND, QUEUE
from bench.workers import (
    CONCURRENCY,
    STATS_NOTE,
    configure_queue,
    extra_tables,
    fill_ours,
    fleet,
    ours_timed,
)

NAME = "drain_with_limits"
N = 20_000
PROCESSES = 2
MAX_CONCURRENCY = 150
RATE_LIMIT = 1_000_000
RATE_WINDOW = 60
GROUPS = 100
GROUP_CONCURRENCY = 10
SHARE_OF_PLAIN = 0.7


def run(env: BenchEnv) -> list[dict[str, Any]]:
    def limited() -> None:
        configure_queue(
            env,
            QUEUE,
            paused=True,
            max_concurrency=MAX_CONCURRENCY,
            rate_limit=RATE_LIMIT,
            rate_window=RATE_WINDOW,
            group_concurrency=GROUP_CONCURRENCY,
        )

    def plain() -> None:
        configure_queue(env, QUEUE, paused=True)

    try:
        with extra_tables(env, "queue_engine_claimlog"), fleet(env, QUEUE, PROCESSES) as workers:
            grouped_jobs = fill_ours(N, ASYNC_KIND, groups=GROUPS)
            ours_s, plain_s = env.compare(
                ours_timed(env, workers, grouped_jobs, configure=limited),
                ours_timed(env, workers, fill_ours(N, ASYNC_KIND), configure=plain),
            )
    finally:
        configure_queue(env, QUEUE, paused=False)  # no limits left for later scenarios
    plain_rates = per_second(N, plain_s)
    return [
        env.result(
            NAME,
            unit="jobs/s",
            samples=per_second(N, ours_s),
            baseline_samples=plain_rates,
            target=f">= {SHARE_OF_PLAIN:.0%} of the plain drain measured in this run",
            target_value=SHARE_OF_PLAIN * statistics.median(plain_rates),
            n=N,
            processes=PROCESSES,
            method=f"runworker --concurrency {CONCURRENCY} --processes {PROCESSES}, async no-op "
            f"kind; queue max_concurrency={MAX_CONCURRENCY}, rate_limit={RATE_LIMIT:,} per "
            f"{RATE_WINDOW} s, group_concurrency={GROUP_CONCURRENCY}, jobs spread over {GROUPS} "
            "group keys; time from un-pausing until all are in queue_engine_jobrecord" + STATS_NOTE,
            baseline_method="ours, the same workers: a plain drain of the same jobs (no limits, "
            "no group keys), alternating with the limited runs",
        )
    ]
