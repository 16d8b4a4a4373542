"""The kill switch per kind: a paused kind stays queued on every worker while the other
kinds of its queue drain, and runs again within a second of its resume."""

from __future__ import annotations

import time

import pytest

from queue_engine import ops
from queue_engine.exceptions import OpsError
from queue_engine.models import AuditEvent, Job, JobRecord
from tests.support import kind_jobs
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow


def test_a_paused_kind_waits_on_every_worker_while_its_queue_drains(workers: Workers) -> None:
    assert ops.pause_kind("tests.switch.paused", actor="alice") is True
    assert ops.pause_kind("tests.switch.paused", actor="alice") is False  # already paused
    held = kind_jobs.paused_kind.enqueue_many([{"n": i} for i in range(50)])
    flowing = kind_jobs.other_kind.enqueue_many([{"n": i} for i in range(300)])
    for _ in range(3):
        workers.start("--queues", "switch")

    wait_for(
        lambda: JobRecord.objects.filter(pk__in=flowing, state="succeeded").count() == 300,
        timeout=30,
        message="the other kind to drain",
    )
    time.sleep(1)  # three workers polling: none may take a paused job meanwhile
    assert Job.objects.filter(pk__in=held, state="available").count() == 50
    assert not JobRecord.objects.filter(pk__in=held).exists()

    resumed = time.monotonic()
    assert ops.resume_kind("tests.switch.paused", actor="alice") is True
    wait_for(
        lambda: JobRecord.objects.filter(pk__in=held, state="succeeded").count() == 50,
        timeout=10,
        message="the resumed kind to drain",
    )
    # Idle workers are woken by the resume: they do not wait for a poll.
    assert time.monotonic() - resumed < 1.5
    events = list(
        AuditEvent.objects.filter(target_type="kind").order_by("id").values_list("action", "actor")
    )
    assert events == [("pause_kind", "alice"), ("resume_kind", "alice")]


def test_pausing_a_kind_nobody_knows_is_refused_with_the_reason(transactional_db: None) -> None:
    with pytest.raises(OpsError, match="no @job of that kind is registered"):
        ops.pause_kind("tests.switch.typo")
    with pytest.raises(OpsError, match="a kind is a name of 1 to 255 characters"):
        ops.pause_kind("")
    assert not AuditEvent.objects.exists()
