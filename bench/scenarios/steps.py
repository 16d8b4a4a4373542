"""Drain 20,000 queued jobs of three durable steps each (ctx.step), with 2 processes.

As `drain_sync` (plain-function handlers, 2 processes, the same fleet and baseline), with
a handler that records three steps: each attempt reads its recorded steps once, and
each step is one INSERT in the handler's own connection. The runs of the steps handler,
of the same handler without steps (`drain_sync`'s no-op) and of the baseline take turns;
the row reports the steps handler against the baseline, and its method says how it
compares with the no-op.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from bench.harness import BenchEnv, per_second
from bench.jobs import KIND, QUEUE, STEPS_KIND
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

NAME = "steps"
N = 20_000
PROCESSES = 2


def run(env: BenchEnv) -> list[dict[str, Any]]:
    with fleet(env, QUEUE, processes=PROCESSES) as workers:
        steps_s, plain_s, base_s = compare_many(
            env,
            [
                ours_timed(env, workers, fill_ours(N, STEPS_KIND)),
                ours_timed(env, workers, fill_ours(N, KIND)),
                baseline_timed(env, QUEUE, PROCESSES, fill_baseline(env, N)),
            ],
        )
    against_plain = median(plain_s) / median(steps_s)
    return [
        env.result(
            NAME,
            unit="jobs/s",
            samples=per_second(N, steps_s),
            baseline_samples=per_second(N, base_s),
            target="none set: reported against drain_sync",
            target_value=None,
            n=N,
            processes=PROCESSES,
            method=f"runworker --concurrency {CONCURRENCY} --processes {PROCESSES}, a plain "
            f"def handler that records 3 steps (ctx.step) per job; {against_plain:.2f} of the "
            f"same fleet's rate for drain_sync's no-op handler (median "
            f"{median(per_second(N, plain_s)):,.0f} jobs/s, measured in turn with it); time "
            f"from un-pausing the queue until all {N:,} jobs are in queue_engine_jobrecord"
            + STATS_NOTE,
            baseline_method="as drain's: the psycopg loop in 2 processes, batches of 100",
        )
    ]
