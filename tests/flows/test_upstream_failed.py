"""Flow nodes that can no longer run: `upstream_failed`, with the node that caused it, out
of the waiting counts, and back to waiting when the flow is requeued or the node redriven."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from queue_engine import ops, reads
from queue_engine.exceptions import OpsError
from queue_engine.flows import Flow
from queue_engine.models import Job, JobRecord
from queue_engine.ops import flows as ops_flows
from tests.support import jobs
from tests.support.flow_helpers import flow_settled, flow_state, records
from tests.support.metrics import TOKEN, samples, scrape
from tests.support.workers import Workers

pytestmark = pytest.mark.slow


def failing_flow(fix: Path) -> int:
    """`a` succeeds; `x` is dead until `fix` exists; `b` waits for `x`; `c` for `a` and
    `b`; `d` for `c`; `side` depends on nothing."""
    flow = Flow("nightly payouts")
    flow.add("a", jobs.node, label="a")
    flow.add("x", jobs.fails_until, path=str(fix))
    flow.add("b", jobs.node, label="b", depends_on=["x"])
    flow.add("c", jobs.node, label="c", depends_on=["a", "b"])
    flow.add("d", jobs.node, label="d", depends_on=["c"])
    flow.add("side", jobs.node, label="side")
    return flow.submit()


def failed_flow(workers: Workers, fix: Path) -> int:
    """failing_flow, run by a worker until nothing of it can run, the worker then stopped."""
    flow_id = failing_flow(fix)
    workers.start("--queues", "flows")
    flow_settled(flow_id, "failed")
    workers.stop_all()
    return flow_id


def live(flow_id: int) -> dict[str | None, Job]:
    return {j.node_key: j for j in Job.objects.filter(flow_id=flow_id)}


def test_a_dead_node_s_dependants_can_no_longer_run_and_name_it(
    workers: Workers, executions: None, tmp_path: Path, settings: Any
) -> None:
    flow_id = failed_flow(workers, tmp_path / "fixed")

    x = records(flow_id)["x"]
    waiting = live(flow_id)
    assert sorted(map(str, waiting)) == ["b", "c", "d"]
    for key in ("b", "c", "d"):
        assert waiting[key].state == "upstream_failed"
        assert waiting[key].meta["upstream"] == {"job": x.id, "key": "x", "state": "failed"}
    # They wait for nothing that can happen: not counted as blocked (waiting) anywhere.
    counts = {q.queue: q for q in reads.queue_counts()}["flows"].states
    assert (counts["blocked"].count, counts["upstream_failed"].count) == (0, 3)
    settings.QUEUE_ENGINE = {**getattr(settings, "QUEUE_ENGINE", {}), "METRICS_TOKEN": TOKEN}
    scraped = samples(scrape())
    gauge = "queue_engine_jobs"
    assert scraped[(gauge, (("queue", "flows"), ("state", "blocked")))] == 0
    assert scraped[(gauge, (("queue", "flows"), ("state", "upstream_failed")))] == 3
    graph = reads.flow_graph(flow_id)
    assert graph is not None
    assert graph.flow.nodes.get("blocked", 0) == 0
    assert graph.flow.nodes["upstream_failed"] == 3


def test_a_requeue_brings_them_back_waiting_and_the_flow_then_succeeds(
    workers: Workers, executions: None, tmp_path: Path
) -> None:
    fix = tmp_path / "fixed"
    flow_id = failed_flow(workers, fix)
    fix.touch()

    ops_flows.requeue_flow(flow_id, actor="ops")

    waiting = live(flow_id)
    assert {k: (j.state, j.pending_deps) for k, j in waiting.items()} == {
        "x": ("available", 0),
        "b": ("blocked", 1),
        "c": ("blocked", 1),  # `a` succeeded and stays counted
        "d": ("blocked", 1),
    }
    assert not any("upstream" in j.meta for j in waiting.values())
    workers.start("--queues", "flows")
    flow_state(flow_id, "succeeded")
    assert {r.state for r in records(flow_id).values()} == {"succeeded"}


def test_redriving_the_dead_node_alone_lets_its_dependants_wait_for_it_again(
    workers: Workers, executions: None, tmp_path: Path
) -> None:
    fix = tmp_path / "fixed"
    flow_id = failed_flow(workers, fix)
    fix.touch()

    ops.redrive_job(records(flow_id)["x"].id, actor="ops")

    assert {k: j.state for k, j in live(flow_id).items()} == {
        "x": "available",
        "b": "blocked",
        "c": "blocked",
        "d": "blocked",
    }
    workers.start("--queues", "flows")
    wait = flow_state(flow_id, "succeeded")
    assert wait.state == "succeeded"
    assert records(flow_id)["d"].result == {"label": "d", "saw": ["c"]}


def test_a_retry_of_a_node_that_can_no_longer_run_names_the_dead_ancestor(
    workers: Workers, executions: None, tmp_path: Path
) -> None:
    flow_id = failed_flow(workers, tmp_path / "fixed")

    with pytest.raises(OpsError, match=r"its ancestor 'x' \(job \d+\) is dead"):
        ops.retry_job(live(flow_id)["d"].id, actor="ops")


def test_a_dead_spawned_child_stops_the_join_and_a_requeue_runs_only_it_again(
    workers: Workers, executions: None, tmp_path: Path
) -> None:
    fix = tmp_path / "fixed"
    flow = Flow("dynamic")
    flow.add("spawner", jobs.spawn_one_failing, path=str(fix))
    flow.add("join", jobs.collect, depends_on=["spawner"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")
    flow_settled(flow_id, "failed")
    workers.stop_all()

    join = live(flow_id)["join"]
    dead = records(flow_id)["spawner[flaky]"]
    assert join.state == "upstream_failed"
    assert join.meta["upstream"] == {"job": dead.id, "key": "spawner[flaky]", "state": "failed"}

    fix.touch()
    assert ops_flows.requeue_flow(flow_id, actor="ops") == 1
    assert live(flow_id)["join"].state == "blocked"
    workers.start("--queues", "flows")
    flow_state(flow_id, "succeeded")
    done = records(flow_id)
    assert sorted(map(str, done)) == ["join", "spawner", "spawner[0]", "spawner[flaky]"]
    assert done["join"].result == {"parents": 3, "ones": 1}
    assert JobRecord.objects.filter(flow_id=flow_id, node_key="spawner").get().attempt == 1
