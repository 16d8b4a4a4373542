"""A chain of 1,000 flow nodes (each depends on the one before), with 2 worker processes.

Strictly sequential: each node's settle releases the next, which a worker then claims.
No baseline exists for chains: the baseline field holds the rate of a plain drain of
10,000 independent jobs by the same workers, measured alternately in this run, so the
ratio says what share of the drain rate a chain keeps (there is no target).
"""

from __future__ import annotations

from typing import Any

from bench.harness import BenchEnv, per_second
from bench.jobs import ASYNC_KIND, QUEUE, async_noop
from bench.workers import (
    CONCURRENCY,
    FLOW_TABLES,
    STATS_NOTE,
    extra_tables,
    fill_ours,
    fleet,
    ours_timed,
)
from queue_engine.flows import Flow

NAME = "flow_chain"
NODES = 1_000
DRAIN_N = 10_000
PROCESSES = 2
TARGET = 600  # nodes/s (issue 21)


def run(env: BenchEnv) -> list[dict[str, Any]]:
    with extra_tables(env, *FLOW_TABLES), fleet(env, QUEUE, PROCESSES) as workers:
        ours_s, drain_s = env.compare(
            ours_timed(env, workers, submit_chain),
            ours_timed(env, workers, fill_ours(DRAIN_N, ASYNC_KIND)),
        )
    return [
        env.result(
            NAME,
            unit="nodes/s",
            samples=per_second(NODES, ours_s),
            baseline_samples=per_second(DRAIN_N, drain_s),
            target=f">= {TARGET} nodes/s",
            target_value=TARGET,
            n=NODES,
            processes=PROCESSES,
            method=f"Flow: a chain of {NODES:,} nodes (node i depends on node i-1), async no-op "
            f"kind, submitted in one transaction; runworker --concurrency {CONCURRENCY} "
            f"--processes {PROCESSES}; time from un-pausing until all nodes are in "
            "queue_engine_jobrecord" + STATS_NOTE,
            baseline_method=f"no baseline exists for chains: the drain rate instead (ours, the "
            f"same workers, {DRAIN_N:,} independent jobs, alternating with the chain runs)",
        )
    ]


def submit_chain(rep: int) -> int:
    flow = Flow(f"bench chain {rep}")
    previous: list[str] = []
    for i in range(NODES):
        key = flow.add(f"node[{i}]", async_noop, depends_on=previous, to=f"user{i}@example.com")
        previous = [key]
    flow.submit()
    return NODES
