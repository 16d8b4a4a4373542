"""A fan-out/fan-in flow: one root, 10,000 children, one join (10,002 nodes), with 2
worker processes, beside a plain drain of as many jobs by the same workers.

The flow is built with queue_engine.flows.Flow and submitted in one transaction into the
paused queue; the time runs from un-pausing until every node is in the history table.
Every child's settle releases the join's count (one row all children update), and the
join's claim gathers 10,000 parent outputs. The ratio to the drain is the cost of the
graph; the target is >= 0.6 (issue 45).
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from bench.harness import BenchEnv, per_second
from bench.jobs import ASYNC_KIND, QUEUE, async_noop, sample_payloads
from bench.workers import (
    CONCURRENCY,
    FLOW_TABLES,
    STATS_NOTE,
    compare_many,
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
    parts = os.environ.get("FLOW_FANOUT") == "parts"
    with extra_tables(env, *FLOW_TABLES), fleet(env, QUEUE, PROCESSES) as workers:
        timeds = [
            ours_timed(env, workers, submit_fanout),
            ours_timed(env, workers, fill_ours(NODES, ASYNC_KIND)),
        ]
        if parts:
            ours_s, drain_s, rootless_s = compare_many(
                env, [*timeds, ours_timed(env, workers, submit_rootless)]
            )
        else:
            ours_s, drain_s = env.compare(*timeds)
    drain_rates = per_second(NODES, drain_s)
    rows = [
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
    if parts:
        rows.append(
            env.result(
                f"{NAME} (no root)",
                unit="nodes/s",
                # Per node, against the drain's rate per job: the run has one node less.
                samples=per_second(CHILDREN + 1, rootless_s),
                baseline_samples=drain_rates,
                target=f">= {SHARE_OF_DRAIN:.0%} of the drain (for comparison only)",
                target_value=SHARE_OF_DRAIN * statistics.median(drain_rates),
                n=CHILDREN + 1,
                processes=PROCESSES,
                method=f"the same flow without its root: {CHILDREN:,} children runnable from "
                "the submit, then the join; the three runs rotated",
                baseline_method="the drain of this run",
            )
        )
    return rows


def submit_fanout(rep: int) -> int:
    flow = Flow(f"bench fan-out {rep}")
    flow.add("root", async_noop, to="root@example.com")
    children = flow.fan_out("child", async_noop, sample_payloads(CHILDREN), depends_on=["root"])
    flow.add("join", async_noop, to="join@example.com", depends_on=children)
    flow.submit()
    return NODES


def submit_rootless(rep: int) -> int:
    """The fan-out without its root: no child waits, so none is released."""
    flow = Flow(f"bench fan-out without a root {rep}")
    children = flow.fan_out("child", async_noop, sample_payloads(CHILDREN))
    flow.add("join", async_noop, to="join@example.com", depends_on=children)
    flow.submit()
    return CHILDREN + 1
