"""Jobs that wait for the world: signals (ctx.wait_for_signal, send_signal) and durable
sleep (ctx.sleep_for), with real runworker processes.

Every step's effect is a committed row in test_step_runs, so the tests count what ran
across parks, resumes and kills.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from queue_engine import send_signal
from queue_engine.models import Job, JobSignal, QueueConfig
from queue_engine.ops import reschedule_jobs, wake_jobs
from tests.support import wait_jobs
from tests.support.step_runs import runs
from tests.support.workers import ROOT, Workers, ended, wait_for

pytestmark = pytest.mark.slow


def parked(job_id: int, timeout: float = 20) -> Job:
    return wait_for(
        lambda: Job.objects.filter(pk=job_id, state="parked").first(),
        timeout=timeout,
        message=f"job {job_id} to park",
    )


def send_from_another_process(job_id: int, name: str, payload: object, *, commit: bool) -> None:
    """send_signal in a Django shell of its own, in a transaction it commits or rolls back."""
    end = "pass" if commit else "transaction.set_rollback(True)"
    code = (
        "from django.db import transaction\n"
        "from queue_engine import send_signal\n"
        "with transaction.atomic():\n"
        f"    send_signal({job_id}, {name!r}, {payload!r})\n"
        f"    {end}\n"
    )
    env = Workers(ROOT).env()
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True
    )


def test_a_parked_job_resumes_with_the_committed_signal_only(
    step_runs: None, workers: Workers
) -> None:
    job_id = wait_jobs.wait_signal.enqueue().pk
    workers.start("--queues", "waits")

    job = parked(job_id)
    assert job.meta["parked"]["signal"] == "go"
    assert job.attempt == 0  # parking used no attempt
    assert job.lease_owner is None and job.claim_token is None
    send_from_another_process(job_id, "go", {"n": 1}, commit=False)

    # A rolled-back signal wakes nothing and leaves no mail.
    assert Job.objects.get(pk=job_id).state == "parked"
    assert not JobSignal.objects.filter(job_id=job_id).exists()
    send_from_another_process(job_id, "go", {"n": 2}, commit=True)

    record = ended(job_id)
    assert record.state == "succeeded", record.errors
    assert record.result == {"n": 2}
    assert record.attempt == 1
    assert runs(job_id) == [("before", 1), ("after", 1)]  # "before" did not run again
    assert not JobSignal.objects.filter(job_id=job_id).exists()


def test_a_signal_sent_before_the_wait_is_kept_until_it_waits(
    step_runs: None, workers: Workers
) -> None:
    job_id = wait_jobs.wait_signal.enqueue().pk
    with transaction.atomic():
        send_signal(job_id, "go", "early")
    workers.start("--queues", "waits")

    record = ended(job_id)

    assert record.state == "succeeded", record.errors
    assert record.result == "early"
    assert runs(job_id) == [("before", 1), ("after", 1)]


def test_a_signal_committed_while_the_job_parks_wakes_it(step_runs: None, workers: Workers) -> None:
    job_id = wait_jobs.wait_signal.enqueue(pause=0.5).pk
    workers.start("--queues", "waits")
    wait_for(lambda: ("before", 1) in runs(job_id), timeout=20, message="the job to start")

    # Sent while the job runs, committed only after its wait has looked for mail (it
    # waits for this transaction's lock on the job) and found none.
    with transaction.atomic():
        send_signal(job_id, "go", "in between")
        # A window: the job's wait looks for mail while this transaction holds it.
        time.sleep(2)

    record = ended(job_id)
    assert record.state == "succeeded", record.errors
    assert record.result == "in between"


def test_two_signals_of_one_name_are_consumed_once_each_in_order(
    transactional_db: None, workers: Workers
) -> None:
    job_id = wait_jobs.two_signals.enqueue().pk
    async_id = wait_jobs.async_wait_signal.enqueue().pk
    send_signal(job_id, "go", 1)
    workers.start("--queues", "waits")
    wait_for(
        lambda: Job.objects.filter(pk=job_id, state="parked", meta__parked__step="signal:go#2"),
        timeout=20,
        message="the second wait to park",
    )
    parked(async_id)
    send_signal(job_id, "go", 2)
    send_signal(job_id, "go", 3)  # kept: nothing waits for it
    send_signal(async_id, "go", "async")

    assert ended(job_id).result == [1, 2]
    assert ended(async_id).result == {"got": "async"}
    assert list(JobSignal.objects.filter(job_id=job_id).values_list("payload", flat=True)) == [3]


def test_a_signal_is_delivered_once_across_kill_9_while_parked_and_while_resuming(
    step_runs: None, workers: Workers
) -> None:
    QueueConfig.objects.update_or_create(name="waits", defaults={"lock_duration": 2})
    job_id = wait_jobs.wait_signal.enqueue(hang_after=True).pk
    first = workers.start("--queues", "waits")
    parked(job_id)
    first.send_signal(signal.SIGKILL)  # killed while the job is parked: nothing of it lost
    first.wait()
    send_signal(job_id, "go", "once")
    second = workers.start("--queues", "waits")
    wait_for(lambda: ("resumed", 1) in runs(job_id), timeout=20, message="the resume")
    second.send_signal(signal.SIGKILL)  # killed after the signal was consumed
    second.wait()
    send_signal(job_id, "go", "twice")  # a second signal must not reach the same wait
    workers.start("--queues", "waits")  # rescues the job once its 2 s lease has expired

    record = ended(job_id)

    assert record.state == "succeeded", record.errors
    assert record.result == "once"
    assert record.rescues == 1
    assert runs(job_id) == [("before", 1), ("resumed", 1), ("after", 2)]
    assert list(JobSignal.objects.filter(job_id=job_id).values_list("payload", flat=True)) == [
        "twice"
    ]


def test_a_wait_times_out_with_signal_timeout_or_its_default(
    step_runs: None, workers: Workers
) -> None:
    failing = wait_jobs.wait_signal.enqueue(timeout=0.5).pk
    defaulted = wait_jobs.signal_or_default.enqueue(timeout=0.5).pk
    workers.start("--queues", "waits")

    record = ended(failing, timeout=60)
    assert record.state == "failed"
    assert record.attempt == 3  # the kind's retry rules applied, each retry waiting afresh
    assert {e["class"] for e in record.errors} == {"queue_engine.exceptions.SignalTimeout"}
    assert "no signal 'go' came in time" in record.errors[-1]["message"]
    assert runs(failing) == [("before", 1)]
    assert ended(defaulted).result == {"none": True}


def test_a_durable_sleep_survives_a_worker_restart_and_an_operator_can_end_it(
    step_runs: None, workers: Workers
) -> None:
    sleeper = wait_jobs.durable_sleep.enqueue(seconds=3).pk
    long_sleeper = wait_jobs.durable_sleep.enqueue(seconds=3600).pk
    first = workers.start("--queues", "waits")
    parked(sleeper)
    parked(long_sleeper)
    first.send_signal(signal.SIGTERM)
    first.wait(15)
    workers.start("--queues", "waits")

    record = ended(sleeper)
    assert record.state == "succeeded", record.errors
    assert record.attempt == 1
    assert runs(sleeper) == [("before", 1), ("after", 1)]
    assert Job.objects.get(pk=long_sleeper).state == "parked"

    assert wake_jobs([long_sleeper], actor="ops@example.com") == 1
    assert ended(long_sleeper).state == "succeeded"
    assert runs(long_sleeper) == [("before", 1), ("after", 1)]


def test_a_new_time_ends_a_durable_sleep_or_a_signals_wait_early(
    step_runs: None, workers: Workers
) -> None:
    sleeper = wait_jobs.durable_sleep.enqueue(seconds=3600).pk
    waiter = wait_jobs.signal_or_default.enqueue(timeout=3600).pk
    workers.start("--queues", "waits")
    parked(sleeper)
    parked(waiter)
    # Later first: the wait stays parked, with its new deadline.
    later = timezone.now() + timedelta(hours=3)
    assert reschedule_jobs([sleeper], later, actor="ops@example.com") == 1
    job = Job.objects.get(pk=sleeper)
    assert (job.state, datetime.fromisoformat(job.meta["parked"]["until"])) == ("parked", later)

    assert reschedule_jobs([sleeper, waiter], timezone.now(), actor="ops@example.com") == 2

    record = ended(sleeper)
    assert record.state == "succeeded", record.errors
    assert record.attempt == 1
    assert runs(sleeper) == [("before", 1), ("after", 1)]
    assert ended(waiter).result == {"none": True}  # its wait timed out: the default
