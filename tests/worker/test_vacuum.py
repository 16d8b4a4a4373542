"""The leader vacuums the live job table when its dead rows pile up (worker/services/vacuum.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from queue_engine.models import Job
from queue_engine.worker.services import vacuum
from queue_engine.worker.services.vacuum import LiveTableVacuum
from tests.support.services import run_service
from tests.support.workers import Workers, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

STATS = """
SELECT n_dead_tup, vacuum_count FROM pg_stat_user_tables
 WHERE relid = 'queue_engine_job'::regclass
"""


def stats() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(STATS)
        dead, vacuums = cursor.fetchone()
    return int(dead), int(vacuums)


def leave_dead_rows(n: int) -> None:
    """n jobs no worker would claim (due in a day), deleted: n dead rows, counted."""
    start = stats()[0]
    later = timezone.now() + timedelta(days=1)
    Job.objects.bulk_create(
        Job(kind="tests.noop", queue="vacuum", state="scheduled", run_at=later) for _ in range(n)
    )
    Job.objects.filter(queue="vacuum").delete()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    wait_for(lambda: stats()[0] >= start + n, timeout=15, message="the statistics to count them")


@pytest.fixture
def no_autovacuum() -> Iterator[None]:
    """Autovacuum kept off the table, so that only the leader's vacuum can clear it."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE queue_engine_job SET (autovacuum_enabled = off)")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE queue_engine_job RESET (autovacuum_enabled)")


def vacuum_once(conninfo: str, service: LiveTableVacuum) -> None:
    async def once(conn: Any) -> None:
        try:
            await service.vacuum([vacuum.LIVE])
        finally:
            await service.close()

    run_service(conninfo, once)


@pytest.mark.slow
def test_the_leader_vacuums_the_live_table_once_its_dead_rows_pile_up(
    workers: Workers, no_autovacuum: None
) -> None:
    leave_dead_rows(vacuum.MIN_DEAD + 2_000)
    _, vacuums = stats()

    workers.start("--queues", "vacuum")

    wait_for(
        lambda: stats()[1] > vacuums and stats()[0] < vacuum.MIN_DEAD,
        timeout=30,
        message="the leader's vacuum",
    )


def test_a_few_dead_rows_are_left_to_autovacuum(conninfo: str, no_autovacuum: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute("VACUUM queue_engine_job")
    leave_dead_rows(500)

    assert not run_service(conninfo, LiveTableVacuum(conninfo).due)


def test_dead_rows_a_vacuum_could_not_remove_do_not_call_for_another(
    conninfo: str, no_autovacuum: None
) -> None:
    service = LiveTableVacuum(conninfo)
    with psycopg.connect(conninfo) as pinned:
        # A snapshot taken before the rows die: vacuum must keep them while it lives.
        pinned.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        pinned.execute("SELECT count(*) FROM queue_engine_job")
        leave_dead_rows(vacuum.MIN_DEAD + 2_000)
        assert run_service(conninfo, service.due)

        vacuum_once(conninfo, service)

        assert service.vacuums == 1 and service.left[vacuum.LIVE] >= vacuum.MIN_DEAD
        assert not run_service(conninfo, service.due)
        pinned.rollback()
    vacuum_once(conninfo, service)
    assert service.vacuums == 2 and service.left[vacuum.LIVE] < vacuum.MIN_DEAD


def test_vacuum_keeps_the_empty_pages_at_the_tables_end(conninfo: str, no_autovacuum: None) -> None:
    # Cutting them off would lock every claim, settle and enqueue out of the table.
    def pages() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_relation_size('queue_engine_job')")
            return int(cursor.fetchone()[0]) // 8192

    leave_dead_rows(3_000)  # every row of the table's last pages dead
    before = pages()
    vacuum_once(conninfo, LiveTableVacuum(conninfo))

    assert pages() == before > 0
    with connection.cursor() as cursor:  # autovacuum's vacuums too
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relname = ANY(%s)"
            " AND 'vacuum_truncate=false' = ANY(reloptions)",
            [list(vacuum.TABLES)],
        )
        assert sorted(r[0] for r in cursor.fetchall()) == sorted(vacuum.TABLES)
