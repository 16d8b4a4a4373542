"""The read API (`queue_engine.reads`) on 1,000,000 ended jobs, against 10,000.

The data is bench/console_data.py's (history over 30 days in 8 queues, a live table of
a few thousand jobs, the metrics rollup caught up, tables vacuumed and analyzed). Each
read runs once to warm up, then once per repeat; `value` is the median over repeats of
the slowest read (ms). The baseline is the same reads on a history of BASELINE_HISTORY
jobs: the ratio is what the history's size costs the slowest read.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

from bench import console_data
from bench.harness import BenchEnv, log
from queue_engine import reads
from queue_engine.reads import JobFilter

NAME = "reads_large"
HISTORY = 1_000_000
BASELINE_HISTORY = 10_000
TARGET_MS = 100.0

READS: dict[str, Callable[[], Any]] = {
    "queue_counts": reads.queue_counts,
    "metric_series_15m": partial(reads.metric_series, timedelta(minutes=15)),
    "metric_series_1d": partial(reads.metric_series, timedelta(days=1)),
    "metric_series_30d": partial(reads.metric_series, timedelta(days=30)),
    "metric_series_30d_billing": partial(reads.metric_series, timedelta(days=30), queue="billing"),
    "list_jobs": reads.list_jobs,
    "list_jobs_billing_failed": lambda: reads.list_jobs(JobFilter(queue="billing", state="failed")),
    "list_jobs_kind": lambda: reads.list_jobs(JobFilter(kind="shop.send_receipt")),
    "list_jobs_text": lambda: reads.list_jobs(JobFilter(text="user4242@example.com")),
    "list_flows": reads.list_flows,
}


def run(env: BenchEnv) -> list[dict[str, Any]]:
    base = measure(env, BASELINE_HISTORY)
    ours = measure(env, HISTORY)
    with env.connect() as conn:
        console_data.truncate(conn)
    slowest = [max(per_read[i] for per_read in ours.values()) for i in range(env.repeats)]
    base_slowest = [max(per_read[i] for per_read in base.values()) for i in range(env.repeats)]
    fields: dict[str, Any] = {
        name: {
            "ms": round(statistics.median(ours[name]), 2),
            "baseline_ms": round(statistics.median(base[name]), 2),
        }
        for name in READS
    }
    return [
        env.result(
            NAME,
            unit="ms",
            samples=slowest,
            baseline_samples=base_slowest,
            target=f"< {TARGET_MS:.0f} ms for every read",
            target_value=TARGET_MS,
            n=HISTORY,
            slowest_read=max(fields, key=lambda name: fields[name]["ms"]),
            **fields,
            method=f"each read once to warm up, then once per repeat, in this process; value = "
            f"median over repeats of the slowest read. Data: {HISTORY:,} history rows "
            "(bench/console_data.py)",
            baseline_method=f"the same reads on the same data with {BASELINE_HISTORY:,} history rows",
        )
    ]


def measure(env: BenchEnv, history: int) -> dict[str, list[float]]:
    console_data.seed(env, history)
    log(f"reads_large: {history:,} history rows")
    for call in READS.values():
        call()
    times: dict[str, list[float]] = {name: [] for name in READS}
    for _ in range(env.repeats):
        for name, call in READS.items():
            started = time.perf_counter()
            call()
            times[name].append((time.perf_counter() - started) * 1000)
    return times
