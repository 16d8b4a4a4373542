"""send_signal's refusals and the mailbox's end, and the "wake now" action, without a
worker: jobs parked by hand as a settle parks them."""

from __future__ import annotations

from datetime import datetime, timedelta

import psycopg
import pytest
from django.db import transaction
from django.utils import timezone

from queue_engine import SignalError, ops, send_signal
from queue_engine.connections import conninfo
from queue_engine.exceptions import OpsError
from queue_engine.models import AuditEvent, Job, JobSignal
from tests.support import wait_jobs


def parked_by_hand(signal: str | None) -> Job:
    job = wait_jobs.two_signals.enqueue()
    step = f"signal:{signal}#1" if signal else "sleep#1"
    Job.objects.filter(pk=job.pk).update(
        state="parked", meta={"parked": {"step": step, "signal": signal, "until": None}}
    )
    return job


@pytest.mark.django_db
def test_a_signal_to_a_job_that_is_not_live_or_with_a_bad_payload_writes_nothing() -> None:
    job = wait_jobs.two_signals.enqueue()

    with pytest.raises(SignalError, match="job 987654 is not live"):
        send_signal(987654, "go")
    with pytest.raises(SignalError, match="name must be a string of 1 to 200 characters"):
        send_signal(job.pk, "")
    with pytest.raises(SignalError, match="payload of signal 'go'"):
        send_signal(job.pk, "go", {1, 2})

    assert not JobSignal.objects.exists()


@pytest.mark.django_db
def test_a_signal_wakes_only_a_job_parked_for_its_name() -> None:
    waiting = parked_by_hand("go")
    other = parked_by_hand("other")

    send_signal(waiting.pk, "go", {"n": 1})
    send_signal(other.pk, "go", {"n": 2})

    assert Job.objects.get(pk=waiting.pk).state == "available"
    assert Job.objects.get(pk=other.pk).state == "parked"  # its mail waits for its own wait
    assert JobSignal.objects.filter(job_id=other.pk).count() == 1


@pytest.mark.django_db
def test_removing_a_job_removes_its_unconsumed_signals() -> None:
    job = parked_by_hand("go")
    send_signal(job.pk, "later")

    ops.remove_job(job.pk, actor="ops@example.com")

    assert not JobSignal.objects.filter(job_id=job.pk).exists()


@pytest.mark.django_db
def test_wake_now_ends_parked_waits_only_and_is_audited() -> None:
    sleeping = parked_by_hand(None)
    queued = wait_jobs.two_signals.enqueue()

    woken = ops.wake_jobs([sleeping.pk, queued.pk], actor="ops@example.com")

    assert woken == 1
    job = Job.objects.get(pk=sleeping.pk)
    assert job.state == "available"
    assert job.meta["parked"]["woken"]["by"] == "ops@example.com"
    event = AuditEvent.objects.get(action="wake")
    assert (event.actor, event.target, event.count) == ("ops@example.com", str(sleeping.pk), 1)


@pytest.mark.django_db(transaction=True)
def test_a_signal_in_an_open_transaction_does_not_hold_up_its_running_job() -> None:
    job = wait_jobs.two_signals.enqueue()
    Job.objects.filter(pk=job.pk).update(state="running", claim_token=1)

    with transaction.atomic():
        send_signal(job.pk, "go")
        # What the worker writes on a running job's row meanwhile: a heartbeat.
        with psycopg.connect(conninfo(), autocommit=True) as other:
            other.execute("SET lock_timeout = '2s'")
            beat = other.execute(
                "UPDATE queue_engine_job SET heartbeat_at = now() WHERE id = %s", [job.pk]
            )
            assert beat.rowcount == 1


@pytest.mark.django_db
def test_reschedule_moves_a_wait_and_a_scheduled_job_and_ends_a_wait_whose_time_has_come() -> None:
    sleeping = parked_by_hand(None)
    later = timezone.now() + timedelta(hours=2)
    scheduled = wait_jobs.two_signals.using(run_at=later).enqueue()
    queued = wait_jobs.two_signals.enqueue()
    sooner = timezone.now() + timedelta(minutes=5)

    moved = ops.reschedule_jobs([sleeping.pk, scheduled.pk, queued.pk], sooner, actor="ops")

    assert moved == 2
    job = Job.objects.get(pk=sleeping.pk)
    assert (job.state, job.run_at) == ("parked", sooner)
    assert datetime.fromisoformat(job.meta["parked"]["until"]) == sooner
    assert job.meta["parked"]["due"] is False
    assert Job.objects.get(pk=scheduled.pk).run_at == sooner
    assert Job.objects.get(pk=queued.pk).state == "available"  # left as it was
    event = AuditEvent.objects.get(action="reschedule")
    assert (event.actor, event.count, event.details["when"]) == ("ops", 2, sooner.isoformat())

    # A time that has come ends the wait now, as its deadline would.
    assert ops.reschedule_jobs([sleeping.pk, scheduled.pk], timezone.now(), actor="ops") == 2
    job = Job.objects.get(pk=sleeping.pk)
    assert job.state == "available" and job.meta["parked"]["due"] is True
    assert Job.objects.get(pk=scheduled.pk).state == "available"


@pytest.mark.django_db
def test_reschedule_refuses_a_time_without_a_zone_and_writes_nothing() -> None:
    sleeping = parked_by_hand(None)

    with pytest.raises(OpsError, match="give an aware datetime"):
        ops.reschedule_jobs([sleeping.pk], datetime(2030, 1, 1), actor="ops")

    assert Job.objects.get(pk=sleeping.pk).state == "parked"
    assert not AuditEvent.objects.filter(action="reschedule").exists()
