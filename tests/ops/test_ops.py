"""Operator actions on single jobs, each audited, each refusing what it cannot do."""

from __future__ import annotations

import pytest
from django.utils import timezone

from queue_engine import ops
from queue_engine.exceptions import OpsError
from queue_engine.models import AuditEvent, Job, JobLog, JobRecord, JobStep
from tests.support import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def bury(job: Job, state: str = "failed") -> JobRecord:
    record = JobRecord.objects.create(
        id=job.id,
        queue=job.queue,
        kind=job.kind,
        state=state,
        payload=job.payload,
        attempt=3,
        max_attempts=job.max_attempts,
        dedup_key=job.dedup_key,
        errors=[{"attempt": 3, "class": "builtins.ValueError", "message": "boom"}],
        started_at=timezone.now(),
    )
    Job.objects.filter(pk=job.id).delete()
    return record


def test_redrive_puts_a_dead_job_back_with_fresh_attempts() -> None:
    record = bury(jobs.add.enqueue(a=1, b=2))

    ops.redrive_job(record.id, actor="alice")

    live = Job.objects.get(pk=record.id)
    assert (live.state, live.attempt, live.meta["redriven"]) == ("available", 0, 1)
    assert live.errors[0]["message"] == "boom"
    event = AuditEvent.objects.get()
    assert (event.actor, event.action, event.target) == ("alice", "redrive", str(record.id))


def test_redrive_keeps_a_free_dedup_key_and_drops_a_held_one() -> None:
    first = bury(jobs.add.using(dedup_key="k").enqueue(a=1, b=1))
    holder = jobs.add.using(dedup_key="k").enqueue(a=2, b=2)

    ops.redrive_job(first.id)

    assert Job.objects.get(pk=first.id).dedup_key is None
    assert Job.objects.get(pk=holder.id).dedup_key == "k"


def test_redrive_queue_moves_the_whole_dead_letter_in_batches() -> None:
    ids = [bury(jobs.add.using(dedup_key="same").enqueue(a=i, b=0)).id for i in range(25)]
    bury(jobs.noop.enqueue())  # another queue's dead job stays

    assert ops.redrive_queue("math", actor="bob", batch_size=10) == 25

    assert Job.objects.filter(pk__in=ids, state="available").count() == 25
    assert Job.objects.filter(pk__in=ids, dedup_key="same").count() == 1
    assert JobRecord.objects.filter(state="failed").count() == 1
    events = list(AuditEvent.objects.filter(action="redrive_queue").values_list("count", flat=True))
    assert sorted(events) == [5, 10, 10]


def test_redrive_of_a_live_job_is_refused() -> None:
    job = jobs.add.enqueue(a=1, b=1)

    with pytest.raises(OpsError, match="has not ended"):
        ops.redrive_job(job.id)


def test_retry_runs_a_waiting_job_now_and_redrives_an_ended_one() -> None:
    waiting = jobs.add.using(delay=3600).enqueue(a=1, b=1)
    ended = bury(jobs.add.enqueue(a=2, b=2), state="cancelled")

    assert ops.retry_job(waiting.id, actor="ops") == "run_now"
    assert ops.retry_job(ended.id, actor="ops") == "redriven"

    assert Job.objects.get(pk=waiting.id).state == "available"
    assert Job.objects.get(pk=ended.id).state == "available"
    assert AuditEvent.objects.filter(action="retry").count() == 2


@pytest.mark.parametrize("action", [ops.retry_job, ops.remove_job])
def test_retry_and_remove_refuse_a_running_job(action) -> None:  # type: ignore[no-untyped-def]
    job = jobs.add.enqueue(a=1, b=1)
    Job.objects.filter(pk=job.id).update(state="running")

    with pytest.raises(OpsError, match="it is running now"):
        action(job.id, actor="ops")

    assert Job.objects.get(pk=job.id).state == "running"
    assert not AuditEvent.objects.exists()


def test_cancel_and_remove_are_audited_and_refuse_missing_jobs() -> None:
    job = jobs.add.enqueue(a=1, b=1)
    JobLog.objects.create(job_id=job.id, attempt=1, seq=1, stream="log", text="hello")
    JobStep.objects.create(job_id=job.id, name="one", attempt=1, started_at=timezone.now())

    ops.cancel_job(job.id, actor="carol")
    ops.remove_job(job.id, actor="carol")

    assert not JobRecord.objects.filter(pk=job.id).exists()
    # Its log lines and steps go with it, as retention removes them.
    assert not JobLog.objects.filter(job_id=job.id).exists()
    assert not JobStep.objects.filter(job_id=job.id).exists()
    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True)) == [
        "cancel",
        "remove",
    ]
    with pytest.raises(OpsError, match="does not exist"):
        ops.cancel_job(job.id, actor="carol")
