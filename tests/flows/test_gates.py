"""Gates in flows (Flow.add_gate, send_flow_signal), with real runworker processes."""

from __future__ import annotations

import pytest
from django.db import transaction

from queue_engine import FlowError, SignalError, flow_result, send_flow_signal
from queue_engine.flows import Flow
from queue_engine.models import Job, JobSignal
from tests.support import jobs, wait_jobs
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow


def approval_flow() -> int:
    flow = Flow("publish")
    flow.add("draft", jobs.number, value=1)
    flow.add_gate("approved", signal="approval", depends_on=["draft"], queue="flows")
    flow.add("publish", wait_jobs.echo_outputs, depends_on=["approved"])
    return flow.submit()


def node_state(flow_id: int, key: str) -> str:
    return str(Job.objects.get(flow_id=flow_id, node_key=key).state)


def test_a_gate_holds_its_children_until_the_flow_signal_commits(
    transactional_db: None, workers: Workers
) -> None:
    flow_id = approval_flow()
    workers.start("--queues", "flows")
    gate = wait_for(
        lambda: Job.objects.filter(flow_id=flow_id, node_key="approved", state="parked").first(),
        timeout=20,
        message="the gate to park",
    )
    assert gate.meta["parked"]["signal"] == "approval"
    with transaction.atomic():
        assert send_flow_signal(flow_id, "approval", {"by": "ana"}) == [gate.pk]
        transaction.set_rollback(True)

    # A rolled-back send opens nothing and leaves no mail.
    assert node_state(flow_id, "approved") == "parked"
    assert node_state(flow_id, "publish") == "blocked"
    assert not JobSignal.objects.filter(job_id=gate.pk).exists()
    with transaction.atomic():
        send_flow_signal(flow_id, "approval", {"by": "bo"})

    assert flow_result(flow_id, timeout=20) == {"publish": {"approved": {"by": "bo"}}}


def test_a_flow_signal_sent_before_the_gate_is_reached_opens_it_when_it_is(
    transactional_db: None, workers: Workers
) -> None:
    flow_id = approval_flow()
    send_flow_signal(flow_id, "approval", None)  # the gate is still blocked on "draft"
    assert node_state(flow_id, "approved") == "blocked"

    workers.start("--queues", "flows")

    assert flow_result(flow_id, timeout=20) == {"publish": {"approved": None}}


def test_a_flow_signal_no_gate_waits_for_is_refused_and_writes_nothing(db: None) -> None:
    flow_id = approval_flow()

    with pytest.raises(SignalError, match="no gate waiting for the signal 'aproval'"):
        send_flow_signal(flow_id, "aproval", {"by": "ana"})

    assert not JobSignal.objects.exists()


def test_a_gate_needs_a_signal_name(db: None) -> None:
    flow = Flow("publish")

    with pytest.raises(FlowError, match="gate 'approved'"):
        flow.add_gate("approved", signal="")
