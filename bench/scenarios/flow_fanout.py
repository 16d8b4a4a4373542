"""A fan-out/fan-in flow: one root, 10,000 children, one join (10,002 nodes), with 2
worker processes, beside a plain drain of as many jobs by the same workers.

The flow is built with queue_engine.flows.Flow and submitted in one transaction into the
paused queue; the time runs from un-pausing until every node is in the history table.
Every child's settle releases the join's count (one row all children update), and the
join's claim gathers 10,000 parent outputs. The ratio to the drain is the cost of the
graph; the target is >= 0.6 (issue 45).
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.harness import BenchEnv, per_second
from bench.jobs import ASYNC_KIND, QUEUE, async_noop, sample_payloads
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

NAME = "flow_fanout"
CHILDREN = 10_000
NODES = CHILDREN + 2
PROCESSES = 2
SHARE_OF_DRAIN = 0.6


def run(env: BenchEnv) -> list[dict[str, Any]]:
    with extra_tables(env, *FLOW_TABLES), fleet(env, QUEUE, PROCESSES) as workers:
        ours_s, drain_s = env.compare(
            ours_timed(env, workers, submit_fanout),
            ours_timed(env, workers, fill_ours(NODES, ASYNC_KIND)),
        )
    drain_rates = per_second(NODES, drain_s)
    return [
        env.result(
            NAME,
            unit="nodes/s",
            samples=per_second(NODES, ours_s),
            baseline_samples=drain_rates,
            target=f">= {SHARE_OF_DRAIN:.0%} of the drain of {NODES:,} jobs measured in this run",
            target_value=SHARE_OF_DRAIN * statistics.median(drain_rates),
            n=NODES,
            processes=PROCESSES,
            method=f"Flow: root -> {CHILDREN:,} children (fan_out) -> join, async no-op kind, "
            f"submitted in one transaction; runworker --concurrency {CONCURRENCY} --processes "
            f"{PROCESSES}; time from un-pausing until all {NODES:,} nodes are in "
            "queue_engine_jobrecord" + STATS_NOTE,
            baseline_method=f"ours, the same workers: a drain of {NODES:,} independent jobs "
            "(enqueue_many), alternating with the flow runs",
        )
    ]


def submit_fanout(rep: int) -> int:
    flow = Flow(f"bench fan-out {rep}")
    flow.add("root", async_noop, to="root@example.com")
    children = flow.fan_out("child", async_noop, sample_payloads(CHILDREN), depends_on=["root"])
    flow.add("join", async_noop, to="join@example.com", depends_on=children)
    flow.submit()
    return NODES
