"""Operator actions on flow nodes: what a retry, redrive or remove does to the flow."""

from __future__ import annotations

import pytest
from django.db import connection

from queue_engine import ops
from queue_engine.enqueueing.prepare import JobSpec
from queue_engine.enqueueing.single import enqueue
from queue_engine.exceptions import OpsError
from queue_engine.flows import Flow
from queue_engine.models import AuditEvent, FlowCountdown, FlowRun, Job, JobRecord
from queue_engine.ops import flows as ops_flows
from tests.support import jobs
from tests.support.flow_helpers import flow_state
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow


def half_done_fan_in(workers: Workers) -> tuple[int, dict[str, int]]:
    """`a` succeeds; `x` fails for good; `b` waits for `x`; `c` waits for `a` and `b`:
    both can no longer run."""
    flow = Flow("half-done fan-in")
    flow.add("a", jobs.node, label="a")
    flow.add("x", jobs.node, label="x", fail=True)
    flow.add("b", jobs.node, label="b", depends_on=["x"])
    flow.add("c", jobs.node, label="c", depends_on=["a", "b"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")
    flow_state(flow_id, "failed")
    workers.stop_all()
    ids = {r.node_key or "": r.id for r in JobRecord.objects.filter(flow_id=flow_id)}
    ids.update({j.node_key or "": j.id for j in Job.objects.filter(flow_id=flow_id)})
    c = Job.objects.get(pk=ids["c"])
    # It can no longer run (x is dead), and keeps its count of what it waits for.
    assert (c.state, c.pending_deps) == ("upstream_failed", 2)
    assert c.meta["upstream"] == {"job": ids["x"], "key": "x", "state": "failed"}
    assert FlowCountdown.objects.filter(child_id=c.id).count() == 1
    return flow_id, ids


def test_retry_refuses_a_succeeded_flow_node_its_dependants_counted(
    workers: Workers, executions: None
) -> None:
    _flow_id, ids = half_done_fan_in(workers)

    with pytest.raises(OpsError, match=r"already counted it.*requeue_flow.*rerun_flow"):
        ops.retry_job(ids["a"], actor="ops")

    assert JobRecord.objects.get(pk=ids["a"]).state == "succeeded"
    assert FlowCountdown.objects.filter(child_id=ids["c"]).count() == 1
    assert not AuditEvent.objects.exists()


def test_bulk_retry_and_redrive_skip_a_succeeded_flow_node_and_redrive_the_dead_one(
    workers: Workers, executions: None
) -> None:
    flow_id, ids = half_done_fan_in(workers)

    assert ops.redrive_jobs([ids["a"]], states=("failed", "cancelled", "succeeded")) == 0
    assert ops.retry_jobs([ids["a"], ids["x"]], actor="ops") == 1

    assert JobRecord.objects.get(pk=ids["a"]).state == "succeeded"
    assert Job.objects.get(pk=ids["x"]).state == "available"
    c = Job.objects.get(pk=ids["c"])
    assert (c.state, c.pending_deps) == ("blocked", 2)
    event = AuditEvent.objects.get()
    assert (event.action, event.target, event.count) == ("retry", str(ids["x"]), 1)
    flow_state(flow_id, "running")


@pytest.mark.django_db(transaction=True)
def test_removing_a_flows_last_live_node_ends_the_flow() -> None:
    flow = Flow("removed")
    flow.add("a", jobs.node, label="a")
    flow.add("b", jobs.node, label="b", depends_on=["a"])
    flow_id = flow.submit()
    a = Job.objects.get(flow_id=flow_id, node_key="a")

    ops.remove_job(a.id, actor="ops")  # and b, downstream of it

    assert not Job.objects.filter(flow_id=flow_id).exists()
    row = FlowRun.objects.get(pk=flow_id)
    # Nothing of it ran: it did not succeed.
    assert (row.state, row.removed_nodes) == ("cancelled", 2)
    assert row.finished_at is not None
    assert AuditEvent.objects.get().count == 2


def test_a_flow_whose_failed_branch_was_removed_ends_cancelled_not_succeeded(
    workers: Workers, executions: None
) -> None:
    flow_id, ids = half_done_fan_in(workers)

    ops.remove_job(ids["x"], actor="ops")  # and b and c, downstream of it

    assert list(JobRecord.objects.filter(flow_id=flow_id).values_list("node_key", flat=True)) == [
        "a"
    ]
    assert not Job.objects.filter(flow_id=flow_id).exists()
    row = FlowRun.objects.get(pk=flow_id)
    assert (row.state, row.removed_nodes) == ("cancelled", 3)


def test_a_redriven_node_cancelled_with_its_parent_waits_for_it(
    workers: Workers, executions: None
) -> None:
    flow = Flow("redrive child")
    flow.add("parent", jobs.node, label="parent")
    flow.add("child", jobs.node, label="child", depends_on=["parent"])
    flow_id = flow.submit()
    parent = Job.objects.get(flow_id=flow_id, node_key="parent").id
    child = Job.objects.get(flow_id=flow_id, node_key="child").id
    assert ops.cancel_jobs([parent], actor="ops") == 2  # and the child, downstream

    ops.redrive_job(child, actor="ops")

    # Its parent is still cancelled: it can no longer run, until the parent is redriven.
    assert Job.objects.values_list("state", "pending_deps").get(pk=child) == (
        "upstream_failed",
        1,
    )
    ops.redrive_job(parent, actor="ops")
    workers.start("--queues", "flows")
    flow_state(flow_id, "succeeded")
    done = {r.node_key: r for r in JobRecord.objects.filter(flow_id=flow_id)}
    started, parent_done = done["child"].started_at, done["parent"].finished_at
    assert started is not None and parent_done is not None and started >= parent_done
    assert done["child"].result == {"label": "child", "saw": ["parent"]}


@pytest.mark.django_db(transaction=True)
def test_requeue_leaves_out_a_dedup_key_another_job_holds_now() -> None:
    flow = Flow("dedup requeue")
    flow.add("a", JobSpec(kind="tests.number", payload={"value": 1}, dedup_key="k1"))
    flow_id = flow.submit()
    ops_flows.cancel_flow(flow_id, actor="ops")
    holder = enqueue(JobSpec(kind="tests.number", payload={"value": 2}, dedup_key="k1")).pk

    assert ops_flows.requeue_flow(flow_id, actor="ops") == 1

    node = Job.objects.get(flow_id=flow_id)
    assert (node.state, node.dedup_key) == ("available", None)
    assert Job.objects.get(pk=holder).dedup_key == "k1"


@pytest.mark.django_db(transaction=True)
def test_rerun_of_a_flow_with_every_node_removed_is_refused_clearly() -> None:
    flow = Flow("all removed")
    flow.add("a", jobs.number, value=1)
    flow_id = flow.submit()
    ops.remove_job(Job.objects.get(flow_id=flow_id).pk, actor="ops")

    with pytest.raises(OpsError, match=r"Cannot rerun flow \d+: it has no nodes left"):
        ops_flows.rerun_flow(flow_id, actor="ops")


@pytest.mark.django_db(transaction=True)
def test_bulk_remove_leaves_a_running_node_and_what_depends_on_it() -> None:
    flow = Flow("remove running")
    flow.add("a", jobs.number, value=1)
    flow.add("b", jobs.number, value=1, depends_on=["a"])
    flow.add("c", jobs.number, value=1)
    flow_id = flow.submit()
    a = Job.objects.get(flow_id=flow_id, node_key="a").pk
    c = Job.objects.get(flow_id=flow_id, node_key="c").pk
    Job.objects.filter(pk=a).update(state="running")

    assert ops.remove_jobs([a, c], actor="ops") == 1

    left = set(Job.objects.filter(flow_id=flow_id).values_list("node_key", flat=True))
    assert left == {"a", "b"}


def test_requeue_and_rerun_refuse_a_flow_whose_parents_history_is_gone(
    workers: Workers, executions: None
) -> None:
    flow = Flow("pruned parent")
    flow.add("ok", jobs.node, label="ok")
    flow.add("bad", jobs.node, label="bad", fail=True, depends_on=["ok"])
    flow_id = flow.submit()
    workers.start("--queues", "flows")
    flow_state(flow_id, "failed")
    ok = JobRecord.objects.get(flow_id=flow_id, node_key="ok").pk
    JobRecord.objects.filter(pk=ok).delete()  # as the retention sweep does, after a day

    for action in (ops_flows.requeue_flow, ops_flows.rerun_flow):
        with pytest.raises(OpsError, match=rf"the history of 1 of its node\(s\) \({ok}\)"):
            action(flow_id, actor="ops")

    # Nothing was changed: the dead node is still there to look at.
    assert JobRecord.objects.get(flow_id=flow_id, node_key="bad").state == "failed"
    assert FlowRun.objects.get(pk=flow_id).state == "failed"


def test_a_flow_whose_running_node_was_cancelled_runs_until_the_handler_stops(
    workers: Workers, executions: None
) -> None:
    flow = Flow("cancel running")
    flow.add("slow", jobs.capped, pause=2.0)  # sleeps without looking at is_cancelled()
    flow.add("after", jobs.number, value=1, depends_on=["slow"])
    flow_id = flow.submit()
    workers.start("--queues", "capped,flows", "--concurrency", "4")
    wait_for(lambda: Job.objects.filter(flow_id=flow_id, state="running").exists(), timeout=15)

    ops_flows.cancel_flow(flow_id, actor="ops")

    # Its handler still runs: the flow is not over, and cannot be requeued yet.
    row = FlowRun.objects.get(pk=flow_id)
    assert (row.state, row.finished_at) == ("running", None)
    with pytest.raises(OpsError, match="it is running"):
        ops_flows.requeue_flow(flow_id, actor="ops")
    ended = flow_state(flow_id, "cancelled", timeout=15)
    assert ended.finished_at is not None
    slow = JobRecord.objects.get(flow_id=flow_id, node_key="slow")
    assert slow.state == "cancelled" and "cancelled by ops" in slow.errors[-1]["message"]

    assert ops_flows.requeue_flow(flow_id, actor="ops") == 2
    flow_state(flow_id, "succeeded", timeout=20)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM test_executions WHERE job_id = %s", [slow.id])
        assert cursor.fetchone() == (2,)  # once cancelled, once after the requeue: never both
