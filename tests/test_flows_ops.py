"""Operator actions on flow nodes: what a retry, redrive or remove does to the flow."""

from __future__ import annotations

import pytest

from queue_engine import ops
from queue_engine.flows import Flow
from queue_engine.models import AuditEvent, FlowCountdown, Job, JobRecord
from queue_engine.models import Flow as FlowRow
from tests import jobs
from tests.flow_helpers import flow_state
from tests.workers import Workers

pytestmark = pytest.mark.slow


def half_done_fan_in(workers: Workers) -> tuple[int, dict[str, int]]:
    """`a` succeeds; `x` fails for good; `b` waits for `x`; `c` waits for `a` and `b`."""
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
    assert (c.state, c.pending_deps) == ("blocked", 2)
    assert FlowCountdown.objects.filter(child_id=c.id).count() == 1
    return flow_id, ids


def test_retry_refuses_a_succeeded_flow_node_its_dependants_counted(
    workers: Workers, executions: None
) -> None:
    _flow_id, ids = half_done_fan_in(workers)

    with pytest.raises(ops.OpsError, match=r"already counted it.*requeue_flow.*rerun_flow"):
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
    row = FlowRow.objects.get(pk=flow_id)
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
    row = FlowRow.objects.get(pk=flow_id)
    assert (row.state, row.removed_nodes) == ("cancelled", 3)
