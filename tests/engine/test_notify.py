from __future__ import annotations

import psycopg
import pytest
from django.db import transaction
from django.db.models import Min

from queue_engine.enqueueing.bulk import enqueue_many
from queue_engine.enqueueing.prepare import JobSpec
from queue_engine.models import Job
from queue_engine.worker.floors import EPOCH
from queue_engine.worker.roster import Wake
from tests.support import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def wake_ups(listener: psycopg.Connection) -> list[Wake]:
    return [Wake.parse(n.payload) for n in listener.notifies(timeout=0.3) if n.channel == "qe_wake"]


@pytest.fixture
def listener(conninfo: str):
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("LISTEN qe_wake")
        yield conn


def test_one_wake_up_per_queue_per_statement_at_commit(listener: psycopg.Connection) -> None:
    with transaction.atomic():
        ids = enqueue_many([JobSpec(kind="tests.noop", queue=q) for q in ["a", "b"] * 50])
        before_commit = wake_ups(listener)

    assert before_commit == []
    # Each says how many jobs (how many workers it wakes), carries the lowest id, and
    # where the first of them stands in the claim order (the workers' floors).
    first = {
        queue: (0, int((run_at - EPOCH).total_seconds()) * 10**6 + run_at.microsecond)
        for queue, run_at in Job.objects.values_list("queue").annotate(Min("run_at"))
    }
    assert sorted(wake_ups(listener), key=lambda w: w.queue) == [
        Wake(min(ids[0::2]), 50, 0, "a", first["a"]),
        Wake(min(ids[1::2]), 50, 0, "b", first["b"]),
    ]


def test_jobs_that_need_labels_wake_every_worker(listener: psycopg.Connection) -> None:
    jobs.noop.using(queue="gpu", labels=["gpu"]).enqueue()

    assert [(w.queue, w.count) for w in wake_ups(listener)] == [("gpu", 0)]


def test_the_wake_up_trigger_runs_once_per_statement_not_per_row(conninfo: str) -> None:
    # Postgres folds identical notifications of one transaction into one, so the test
    # above would pass with a row-level trigger too; its cost would not be the same.
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT tgtype & 1 FROM pg_trigger WHERE tgname = 'queue_engine_job_inserted'"
        ).fetchone()

    assert row == (0,), "the trigger fires FOR EACH ROW"


def test_scheduled_jobs_wake_nobody(listener: psycopg.Connection) -> None:
    jobs.noop.using(delay=60).enqueue()

    assert wake_ups(listener) == []


def test_orm_inserts_wake_workers_too(listener: psycopg.Connection) -> None:
    job = Job.objects.create(kind="tests.noop", queue="orm", priority=3)

    assert [(w.ticket, w.count, w.queue, w.first and w.first[0]) for w in wake_ups(listener)] == [
        (job.pk, 1, "orm", 3)
    ]


def test_rolled_back_enqueue_wakes_nobody(listener: psycopg.Connection) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.noop.enqueue()
        raise RuntimeError

    assert wake_ups(listener) == []
