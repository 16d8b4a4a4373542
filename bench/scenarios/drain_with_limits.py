"""Drain 20,000 jobs (2 worker processes) on a queue with every kind of limit set, none of
them binding, beside a plain drain measured in the same run by the same workers.

Limits (issue 45's "limits at full speed"): a fleet-wide cap (max_concurrency=1,000, above
the 2 x 200 slots, so it never binds), a rate limit too large to bind (1,000,000 per 60 s,
but counted on every claim), and group caps (group_concurrency=10) over 100 group keys the
jobs are spread across round robin (about 4 running per key, never 10). What the ratio to
the plain drain measures is the cost of checking limits, not of waiting for them; the
target is >= 0.75.

`DRAIN_LIMITS=parts` measures each limit alone too, and the cap binding at 150, for
RESULTS' account of what each part of the limited claim costs.
"""

from __future__ import annotations

import os
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
MAX_CONCURRENCY = 1_000
BINDING_CAP = 150
RATE_LIMIT = 1_000_000
RATE_WINDOW = 60
GROUPS = 100
GROUP_CONCURRENCY = 10
SHARE_OF_PLAIN = 0.75

EVERY_LIMIT = {
    "max_concurrency": MAX_CONCURRENCY,
    "rate_limit": RATE_LIMIT,
    "group_concurrency": GROUP_CONCURRENCY,
}
PARTS: dict[str, dict[str, int]] = {
    "cap alone": {"max_concurrency": MAX_CONCURRENCY},
    "rate limit alone": {"rate_limit": RATE_LIMIT},
    "group caps alone": {"group_concurrency": GROUP_CONCURRENCY},
    "every limit, the cap binding at 150": {**EVERY_LIMIT, "max_concurrency": BINDING_CAP},
}


def run(env: BenchEnv) -> list[dict[str, Any]]:
    variants = {"every limit": EVERY_LIMIT}
    if os.environ.get("DRAIN_LIMITS") == "parts":
        variants.update(PARTS)
    results = []
    try:
        with extra_tables(env, "queue_engine_claimlog"), fleet(env, QUEUE, PROCESSES) as workers:
            for label, limits in variants.items():

                def limited(limits: dict[str, int] = limits) -> None:
                    configure_queue(
                        env,
                        QUEUE,
                        paused=True,
                        rate_window=RATE_WINDOW,
                        max_concurrency=limits.get("max_concurrency"),
                        rate_limit=limits.get("rate_limit"),
                        group_concurrency=limits.get("group_concurrency"),
                    )

                def plain() -> None:
                    configure_queue(env, QUEUE, paused=True)

                groups = GROUPS if "group_concurrency" in limits else 0
                ours_s, plain_s = env.compare(
                    ours_timed(
                        env, workers, fill_ours(N, ASYNC_KIND, groups=groups), configure=limited
                    ),
                    ours_timed(env, workers, fill_ours(N, ASYNC_KIND), configure=plain),
                )
                results.append(result(env, label, limits, groups, ours_s, plain_s))
    finally:
        configure_queue(env, QUEUE, paused=False)  # no limits left for later scenarios
    return results


def result(
    env: BenchEnv,
    label: str,
    limits: dict[str, int],
    groups: int,
    ours_s: list[float],
    plain_s: list[float],
) -> dict[str, Any]:
    plain_rates = per_second(N, plain_s)
    settings = ", ".join(f"{name}={value:,}" for name, value in limits.items())
    if "rate_limit" in limits:
        settings += f" per {RATE_WINDOW} s"
    if groups:
        settings += f", jobs spread over {groups} group keys"
    return env.result(
        NAME if label == "every limit" else f"{NAME} ({label})",
        unit="jobs/s",
        samples=per_second(N, ours_s),
        baseline_samples=plain_rates,
        target=f">= {SHARE_OF_PLAIN:.0%} of the plain drain measured in this run",
        target_value=SHARE_OF_PLAIN * statistics.median(plain_rates),
        n=N,
        processes=PROCESSES,
        method=f"runworker --concurrency {CONCURRENCY} --processes {PROCESSES}, async no-op "
        f"kind; queue {settings}; time from un-pausing until all are in "
        "queue_engine_jobrecord" + STATS_NOTE,
        baseline_method="ours, the same workers: a plain drain of the same jobs (no limits, "
        "no group keys), alternating with the limited runs",
    )
