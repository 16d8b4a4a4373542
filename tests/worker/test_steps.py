"""Durable steps (ctx.step, ctx.astep): a retried job resumes at the step that failed.

Real runworker subprocesses; every step's effect is a committed row in test_step_runs,
so the tests count how often each step really ran.
"""

from __future__ import annotations

import signal

import pytest
from django.db import connection

from queue_engine import ops
from queue_engine.models import JobRecord, JobStep, QueueConfig
from tests.support import step_jobs
from tests.support.step_runs import runs
from tests.support.workers import Workers, ended, wait_for

pytestmark = pytest.mark.slow


def recorded(job_id: int) -> list[tuple[str, int]]:
    return list(JobStep.objects.filter(job_id=job_id).order_by("id").values_list("name", "attempt"))


def test_a_failed_step_resumes_there_and_earlier_steps_run_once(
    step_runs: None, workers: Workers
) -> None:
    sync_id = step_jobs.three_steps.enqueue(fail_on=1).pk
    async_id = step_jobs.async_steps.enqueue(fail_on=1).pk
    workers.start("--queues", "steps")

    record = ended(sync_id)
    assert record.state == "succeeded", record.errors
    assert record.attempt == 2
    assert "step two failed on attempt 1" in record.errors[0]["message"]
    # Step one ran once, on attempt 1; step two failed there and ran again on attempt 2.
    assert runs(sync_id) == [("one", 1), ("two", 1), ("two", 2), ("three", 2)]
    assert record.result == [
        {"step": "one", "attempt": 1},  # attempt 2 got attempt 1's recorded result
        {"step": "two", "attempt": 2},
        {"step": "three", "attempt": 2},
    ]
    assert recorded(sync_id) == [("one", 1), ("two", 2), ("three", 2)]

    record = ended(async_id)
    assert record.state == "succeeded", record.errors
    assert runs(async_id) == [("one", 1), ("two", 2)]
    assert record.result == [
        {"step": "one", "attempt": 1},
        {"plain": True},
        {"step": "two", "attempt": 2},
    ]
    assert recorded(async_id) == [("one", 1), ("plain", 1), ("two", 2)]


def test_a_step_survives_a_kill_9_of_its_worker(step_runs: None, workers: Workers) -> None:
    QueueConfig.objects.update_or_create(name="steps", defaults={"lock_duration": 2})
    job_id = step_jobs.three_steps.enqueue(hang_on=1).pk
    doomed = workers.start("--queues", "steps")
    wait_for(lambda: ("two", 1) in runs(job_id), timeout=20, message="step two to start")
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    workers.start("--queues", "steps")  # rescues the job once its 2 s lease has expired

    record = ended(job_id)
    assert record.state == "succeeded", record.errors
    assert record.rescues == 1
    # Step one finished before the kill: it never ran again. Step two was cut short,
    # so it ran again, and step three ran once.
    assert runs(job_id) == [("one", 1), ("two", 1), ("two", 2), ("three", 2)]
    assert record.result is not None and record.result[0] == {"step": "one", "attempt": 1}


def test_misused_steps_fail_the_job_for_good_with_a_clear_error(
    step_runs: None, workers: Workers
) -> None:
    repeated = step_jobs.repeated_step.enqueue().pk
    not_json = step_jobs.set_step.enqueue().pk
    atomic = step_jobs.atomic_steps.enqueue().pk
    workers.start("--queues", "steps")

    record = ended(repeated)
    assert record.state == "failed" and record.attempt == 1  # StepError is fatal
    assert record.errors[0]["class"] == "queue_engine.exceptions.StepError"
    assert "step 'same' ran already in this job" in record.errors[0]["message"]
    assert runs(repeated) == [("same", 1)]

    record = ended(not_json)
    assert record.state == "failed" and record.attempt == 1
    assert "the result of step 'a set'" in record.errors[0]["message"]
    assert recorded(not_json) == []

    # Inside ctx.atomic(), the step's record rolled back with the block on attempt 1 (and
    # so did its effect, written in the same transaction): attempt 2 ran it again.
    record = ended(atomic)
    assert record.state == "succeeded", record.errors
    assert record.attempt == 2
    assert runs(atomic) == [("inside", 2)]
    assert recorded(atomic) == [("inside", 2)]


def test_redrive_keeps_the_steps_unless_told_to_clear_them(
    step_runs: None, workers: Workers
) -> None:
    kept = step_jobs.dead_at_three.enqueue().pk
    cleared = step_jobs.dead_at_three.enqueue().pk
    workers.start("--queues", "steps")
    assert ended(kept).state == "failed" and ended(cleared).state == "failed"
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO test_step_runs (job_id, step, attempt) VALUES (%s, 'go', 0), (%s, 'go', 0)",
            [kept, cleared],
        )

    ops.redrive_job(kept, actor="tester")
    ops.redrive_job(cleared, actor="tester", clear_steps=True)

    wait_for(
        lambda: JobRecord.objects.filter(pk__in=[kept, cleared], state="succeeded").count() == 2,
        timeout=30,
        message="both redriven jobs to succeed",
    )
    assert runs(kept) == [("one", 1), ("two", 1), ("three", 1)]
    assert runs(cleared) == [("one", 1), ("two", 1), ("one", 1), ("two", 1), ("three", 1)]
    assert recorded(cleared) == [("one", 1), ("two", 1), ("three", 1)]
    from queue_engine.models import AuditEvent

    details = list(
        AuditEvent.objects.filter(action="redrive").order_by("id").values_list("details", flat=True)
    )
    assert details == [{}, {"clear_steps": True}]
