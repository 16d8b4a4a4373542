from __future__ import annotations

import psycopg
import pytest
from django.db import transaction

from queue_engine.enqueueing.bulk import enqueue_many
from queue_engine.enqueueing.prepare import JobSpec
from queue_engine.models import Job
from tests.support import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def wake_ups(listener: psycopg.Connection) -> list[str]:
    return [n.payload for n in listener.notifies(timeout=0.3) if n.channel == "qe_wake"]


@pytest.fixture
def listener(conninfo: str):
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("LISTEN qe_wake")
        yield conn


def test_one_wake_up_per_queue_per_statement_at_commit(listener: psycopg.Connection) -> None:
    with transaction.atomic():
        enqueue_many([JobSpec(kind="tests.noop", queue=q) for q in ["a", "b"] * 50])
        before_commit = wake_ups(listener)

    assert before_commit == []
    assert sorted(wake_ups(listener)) == ["a", "b"]


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
    Job.objects.create(kind="tests.noop", queue="orm")

    assert wake_ups(listener) == ["orm"]


def test_rolled_back_enqueue_wakes_nobody(listener: psycopg.Connection) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.noop.enqueue()
        raise RuntimeError

    assert wake_ups(listener) == []
