"""Rerun a flow from a node with an edited input: what is upstream is reused, not run."""

from __future__ import annotations

import pytest
from django.db import connection

from queue_engine import ops
from queue_engine.exceptions import OpsError
from queue_engine.models import AuditEvent, FlowRun
from tests.support.flow_helpers import diamond, flow_settled, flow_state, records
from tests.support.workers import Workers

pytestmark = pytest.mark.slow


def runs_of(job_ids: list[int]) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM test_executions WHERE job_id = ANY(%s)", [job_ids])
        return int(cursor.fetchone()[0])


def test_rerun_from_a_node_reuses_upstream_and_runs_it_with_the_new_input(
    executions: None, workers: Workers
) -> None:
    old_id = diamond()
    workers.start("--queues", "flows")
    flow_settled(old_id, "failed")  # `left` may end after `right` failed the flow
    old = records(old_id)

    plan = ops.plan_rerun_from(old_id, "right")
    assert (plan.runs, plan.reused) == (["join", "right"], ["left", "root"])

    new_id = ops.rerun_flow_from(
        old_id, "right", {"label": "right, fixed", "fail": False}, actor="alice"
    )

    flow_state(new_id, "succeeded")
    new = records(new_id)
    assert FlowRun.objects.get(pk=new_id).rerun_of == old_id
    # Reused: not run again, their old results kept, and where they came from said.
    for key in ("root", "left"):
        assert new[key].result == old[key].result
        assert new[key].meta["reused_from"] == {"flow": old_id, "job": old[key].id}
        assert runs_of([new[key].id]) == 0
    # The chosen node ran with its new input, and what depends on it ran after it.
    assert new["right"].payload == {"label": "right, fixed", "fail": False}
    assert new["right"].result == {"label": "right, fixed", "saw": ["root"]}
    assert runs_of([new["right"].id]) == 1
    assert new["join"].state == "succeeded"

    event = AuditEvent.objects.get(action="rerun_flow_from")
    assert (event.actor, event.target, event.count) == ("alice", str(old_id), 2)
    assert event.details["new_flow"] == new_id and event.details["reused"] == 2
    assert '-  "fail": true,' in event.details["payload_diff"]
    assert '+  "fail": false,' in event.details["payload_diff"]
    assert '+  "label": "right, fixed"' in event.details["payload_diff"]


def test_rerun_from_refuses_an_unknown_node_and_a_payload_that_does_not_fit(
    transactional_db: None,
) -> None:
    old_id = diamond()
    with pytest.raises(OpsError, match="it has no such node"):
        ops.rerun_flow_from(old_id, "nope")
    with pytest.raises(OpsError, match="does not fit its kind"):
        ops.rerun_flow_from(old_id, "right", {"colour": "blue"})
    with pytest.raises(OpsError, match="must be a JSON object"):
        ops.rerun_flow_from(old_id, "right", ["not", "an", "object"])  # type: ignore[arg-type]
    assert FlowRun.objects.count() == 1  # nothing was written
    assert not AuditEvent.objects.exists()
