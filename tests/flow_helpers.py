"""Reading a flow's state and its ended nodes, for the flow tests."""

from __future__ import annotations

from queue_engine.models import Flow as FlowRow
from queue_engine.models import JobRecord
from tests.workers import wait_for


def flow_state(flow_id: int, state: str, timeout: float = 30) -> FlowRow:
    return wait_for(
        lambda: FlowRow.objects.filter(pk=flow_id, state=state).first(),
        timeout=timeout,
        message=f"flow {flow_id} to be {state}",
    )


def records(flow_id: int) -> dict[str | None, JobRecord]:
    return {r.node_key: r for r in JobRecord.objects.filter(flow_id=flow_id)}
