"""The console's retry says beforehand that succeeded flow nodes are left out (ops refuses them)."""

from __future__ import annotations

import pytest
from django.db import connection

from queue_engine.console import actions, matching
from queue_engine.flows import Flow
from queue_engine.models import Job, JobRecord
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def succeed_by_hand(job_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH gone AS (DELETE FROM queue_engine_job WHERE id = %s RETURNING *) "
            "INSERT INTO queue_engine_jobrecord (id, queue, kind, payload, attempt, "
            "max_attempts, errors, labels, flow_id, node_key, meta, progress_message, "
            "rescues, run_at, created_at, state, result, finished_at) "
            "SELECT id, queue, kind, payload, 1, max_attempts, errors, labels, flow_id, "
            "node_key, meta, '', 0, run_at, created_at, 'succeeded', 'null', now() FROM gone",
            [job_id],
        )


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
