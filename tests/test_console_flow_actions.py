"""The console's retry says beforehand that succeeded flow nodes are left out (ops refuses them)."""

from __future__ import annotations

import pytest

from queue_engine.console import actions, matching
from queue_engine.flows import Flow
from queue_engine.models import Job, JobRecord
from tests import jobs
from tests.flow_helpers import succeed_by_hand

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
    assert (1, actions.SUCCEEDED_FLOW_NODES) in chosen.skipped
    assert matched.count == 1 and (1, actions.SUCCEEDED_FLOW_NODES) in matched.skipped
    batches = list(matching.batches("retry", {"state": "succeeded"}, matched.upto))
    assert batches == [[plain]]
    assert JobRecord.objects.get(pk=node).state == "succeeded"
