"""Suspects (jobs rescued at least twice) run alone, on one worker: the rest of the fleet
keeps claiming while that worker empties for them."""

from __future__ import annotations

import os
import signal

import pytest
from django.db import connection, transaction

from queue_engine import sql
from queue_engine.models import Job, JobRecord, WorkerProcess
from tests.support import jobs
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.slow

LONG = 6.0  # seconds: the job each worker runs when the suspect arrives
EMPTIES = "this worker empties to run them alone"


def start_fleet(workers: Workers, names: list[str]) -> list[int]:
    """One worker per name, each running a long job of its own (pinned by a label)."""
    for name in names:
        workers.start("--queues", "slow", "--concurrency", "3", "--labels", name)
    wait_for(lambda: WorkerProcess.objects.count() == len(names), timeout=30)
    with transaction.atomic():
        long = [jobs.async_sleeper.enqueue(seconds=LONG).id for _ in names]
        for job_id, name in zip(long, names, strict=True):
            Job.objects.filter(pk=job_id).update(labels=[name])
    wait_for(lambda: Job.objects.filter(pk__in=long, state="running").count() == len(names))
    return long


def enqueue_suspect() -> Job:
    with transaction.atomic():  # committed together: no worker sees it before it is one
        suspect = jobs.async_sleeper.enqueue(seconds=0.5)
        Job.objects.filter(pk=suspect.id).update(rescues=2)
    return Job.objects.get(pk=suspect.id)


def holders(workers: Workers) -> list[int]:
    """The workers (by start order) that took a queue's right to run its suspects."""
    return [i for i, log in enumerate(workers.logs) if EMPTIES in log.read_text(errors="replace")]


def right_held(queue: str) -> bool:
    """Whether a worker holds `queue`'s right to run its suspects (sql.TRY_SUSPECT_RIGHTS)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT hashtextextended(%s, 0)", [f"queue_engine.suspects:{queue}"])
        key = cursor.fetchone()[0] & 0xFFFF_FFFF_FFFF_FFFF
        cursor.execute(sql.LEADER_LOCK_HELD, {"high": key >> 32, "low": key & 0xFFFF_FFFF})
        return bool(cursor.fetchone()[0])


def test_a_suspect_empties_one_worker_while_the_others_keep_claiming(workers: Workers) -> None:
    names = ["w0", "w1", "w2"]
    start_fleet(workers, names)
    backlog = jobs.async_sleeper.enqueue_many([{"seconds": 0.3}] * 150)

    suspect = enqueue_suspect()
    wait_for(lambda: right_held("slow"), message="a worker to take the queue's right")
    ran = wait_for(
        lambda: JobRecord.objects.filter(pk=suspect.id).first(), timeout=30, message="the suspect"
    )
    wait_for(lambda: not right_held("slow"), message="the right to be let go")

    assert (ran.state, ran.rescues) == ("succeeded", 2)
    holder = ran.worker
    beside = [
        r.id
        for r in JobRecord.objects.filter(worker=holder).exclude(pk=ran.id)
        if r.started_at < ran.finished_at and r.finished_at > ran.started_at
    ]
    beside += Job.objects.filter(lease_owner=holder, started_at__lt=ran.finished_at).values_list(
        "id", flat=True
    )
    assert beside == [], "the suspect ran alone on its worker"
    # While the suspect waited for its worker to empty, the other workers kept starting
    # jobs of the backlog, to the end of the wait (and not only with the claims that
    # first saw the suspect).
    late_in_wait = suspect.created_at + (ran.started_at - suspect.created_at) / 2
    waited = JobRecord.objects.filter(
        pk__in=backlog, started_at__gt=late_in_wait, started_at__lt=ran.started_at
    )
    kept_claiming = {r.worker for r in waited if r.worker != holder}
    assert len(kept_claiming) == len(names) - 1, (holder, kept_claiming, workers.output())
    assert (ran.started_at - suspect.created_at).total_seconds() < LONG + 2
    assert len(holders(workers)) == 1, workers.output()


def test_when_the_worker_emptying_for_a_suspect_dies_another_takes_it_over(
    workers: Workers,
) -> None:
    start_fleet(workers, ["w0", "w1"])

    suspect = enqueue_suspect()
    wait_for(lambda: holders(workers), message="a worker to take the suspects' right")
    [dead] = holders(workers)
    survivor = workers.procs[1 - dead]
    dead_pid = workers.procs[dead].pid
    os.kill(dead_pid, signal.SIGKILL)
    ran = wait_for(
        lambda: JobRecord.objects.filter(pk=suspect.id).first(), timeout=30, message="the suspect"
    )

    assert ran.state == "succeeded"
    assert ran.worker == WorkerProcess.objects.get(pid=survivor.pid).id
    assert holders(workers) == [0, 1]
