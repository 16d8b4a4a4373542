"""What OpenTelemetry costs the drain: 20,000 no-op async jobs, 2 worker processes, three
fleets measured in turn in the same run.

- `off`: QUEUE_ENGINE["OPENTELEMETRY"] = False, the engine as if the API were not there;
- `api`: the API installed and on (the default) but no SDK configured, as most projects
  that depend on a library using the API run: the target is >= 0.95 of `off`;
- `sdk`: the SDK configured (bench/otel_sdk.py: a batch processor, an exporter that drops
  the spans), so every attempt makes its CONSUMER span: reported with the cost per attempt.

Each fleet serves its own queue; the other two sit idle while one drains.
"""

from __future__ import annotations

import statistics
from contextlib import ExitStack
from typing import Any

from bench.harness import BenchEnv, per_second
from bench.jobs import ASYNC_KIND
from bench.workers import CONCURRENCY, STATS_NOTE, compare_many, fill_ours, fleet, ours_timed

NAME = "drain_otel"
N = 20_000
PROCESSES = 2
API_OF_OFF = 0.95
FLEETS = {
    "off": {"JOBSITE_OPENTELEMETRY": "0"},
    "api": {"JOBSITE_OPENTELEMETRY": "1"},
    "sdk": {"JOBSITE_OPENTELEMETRY": "1", "JOBSITE_JOB_MODULES": "bench.jobs,bench.otel_sdk"},
}


def run(env: BenchEnv) -> list[dict[str, Any]]:
    with ExitStack() as stack:
        fleets = {
            name: stack.enter_context(fleet(env, f"bench_otel_{name}", PROCESSES, extra_env=extra))
            for name, extra in FLEETS.items()
        }
        seconds = compare_many(
            env,
            [
                ours_timed(env, workers, fill_ours(N, ASYNC_KIND, queue=workers.queues))
                for workers in fleets.values()
            ],
        )
    off_s, api_s, sdk_s = seconds
    method = (
        f"runworker --concurrency {CONCURRENCY} --processes {PROCESSES}, async no-op handler; "
        f"time from un-pausing the queue until all {N:,} jobs are in the history; three "
        "fleets (OpenTelemetry off, API without SDK, SDK with a dropping exporter) in "
        "rotating order" + STATS_NOTE
    )
    per_attempt_us = (statistics.median(sdk_s) - statistics.median(off_s)) / N * PROCESSES * 1e6
    return [
        env.result(
            f"{NAME}_api",
            unit="jobs/s",
            samples=per_second(N, api_s),
            baseline_samples=per_second(N, off_s),
            target=f">= {API_OF_OFF} of the drain with OpenTelemetry off, same run",
            target_ratio=API_OF_OFF,
            n=N,
            processes=PROCESSES,
            method=method,
            baseline_method="the same fleet shape with QUEUE_ENGINE['OPENTELEMETRY'] = False",
        ),
        env.result(
            f"{NAME}_sdk",
            unit="jobs/s",
            samples=per_second(N, sdk_s),
            baseline_samples=per_second(N, off_s),
            target="reported: the cost of a CONSUMER span per attempt",
            n=N,
            processes=PROCESSES,
            method=method + f"; about {per_attempt_us:.0f} µs of a worker process per attempt "
            "over the run without OpenTelemetry (median drain times)",
            baseline_method="the same fleet shape with QUEUE_ENGINE['OPENTELEMETRY'] = False",
        ),
    ]
