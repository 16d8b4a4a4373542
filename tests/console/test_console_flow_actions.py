"""The console's bulk plans say beforehand which jobs ops will leave out: succeeded flow
nodes for a retry, running jobs already asked to stop for a cancel."""

from __future__ import annotations

import pytest

from queue_engine import ops
from queue_engine.console import actions, matching
from queue_engine.flows import Flow
from queue_engine.models import Job, JobRecord
from tests.support import jobs
from tests.support.flow_helpers import succeed_by_hand

pytestmark = pytest.mark.django_db(transaction=True)


def test_retry_plans_leave_succeeded_flow_nodes_out_and_say_why() -> None:
    flow = Flow("done-node")
    flow.add("a", jobs.node, label="a")
    flow.add("b", jobs.node, label="b", depends_on=["a"])
    flow_id = flow.submit()
    node = Job.objects.get(flow_id=flow_id, node_key="a").id
    succeed_by_hand(node)
    plain = jobs.noop.enqueue().id
    succeed_by_hand(plain)

    chosen = actions.plan("retry", [node, plain])
    matched = matching.plan("retry", {"state": "succeeded"})

    assert chosen.ids == [plain]
    assert (1, actions.said(1, actions.SUCCEEDED_FLOW_NODES)) in chosen.skipped
    assert (
        matched.count == 1 and (1, actions.said(1, actions.SUCCEEDED_FLOW_NODES)) in matched.skipped
    )
    batches = list(matching.batches("retry", {"state": "succeeded"}, matched.upto))
    assert batches == [[plain]]
    assert JobRecord.objects.get(pk=node).state == "succeeded"


def test_cancel_plans_leave_jobs_already_asked_to_stop_out_and_say_why() -> None:
    stopping, running, waiting = (jobs.noop.enqueue().id for _ in range(3))
    Job.objects.filter(pk__in=[stopping, running]).update(state="running")
    ops.cancel_job(stopping, actor="ops")  # running: asked to stop, still running

    chosen = actions.plan("cancel", [stopping, running, waiting])
    matched = matching.plan("cancel", {"state": "running"})

    assert chosen.ids == [running, waiting]
    assert chosen.count == 2 and (1, actions.said(1, actions.ALREADY_STOPPING)) in chosen.skipped
    assert matched.count == 1 and (1, actions.said(1, actions.ALREADY_STOPPING)) in matched.skipped
    assert list(matching.batches("cancel", {"state": "running"}, matched.upto)) == [[running]]
