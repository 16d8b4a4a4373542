"""Plain functions on the worker's handler threads: as many threads as the jobs keep
busy, up to the concurrency, and a Django connection each, kept from job to job and
reopened when the server has closed it."""

from __future__ import annotations

from typing import Any

from django.db import connection

from queue_engine.models import JobRecord
from tests.support import jobs
from tests.support.workers import Workers, wait_for


def records(ids: list[int]) -> list[JobRecord]:
    """The history rows of these jobs once they have all ended, by start time."""

    def ended() -> list[JobRecord] | None:
        found = list(JobRecord.objects.filter(pk__in=ids).order_by("started_at"))
        return found if len(found) == len(ids) else None

    return wait_for(ended, timeout=20, message=f"jobs {ids} to end")


def test_a_thread_keeps_its_connection_and_reopens_it_after_the_server_closed_it(
    workers: Workers,
) -> None:
    workers.start("--queues", "threads", "--concurrency", "1")
    first, second = (records([jobs.backend.enqueue().id])[0] for _ in range(2))
    assert first.result == second.result  # one thread, one backend, for both jobs

    pid = ran(first)["pid"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    wait_for(
        lambda: not _backend_alive(pid),
        timeout=10,
        message=f"backend {pid} to exit",
    )

    # The same thread's next job finds its connection closed before its first query:
    # reopened, it succeeds at its first (and only) attempt.
    third = records([jobs.backend.enqueue().id])[0]
    assert (third.state, third.attempt, third.errors) == ("succeeded", 1, [])
    assert ran(third)["thread"] == ran(first)["thread"]
    assert ran(third)["pid"] != pid


def test_slow_plain_functions_run_side_by_side_up_to_the_concurrency(workers: Workers) -> None:
    workers.start("--queues", "threads", "--concurrency", "4")
    ids = jobs.backend.enqueue_many([{"pause": 1.0} for _ in range(8)])

    done = records(ids)

    assert {r.state for r in done} == {"succeeded"}
    assert len({ran(r)["thread"] for r in done}) == 4  # a thread per slot, no more
    starts = [r.started_at for r in done if r.started_at is not None]
    assert len(starts) == 8
    # The first four ran together; the next four each waited for one of them to end.
    assert (starts[3] - starts[0]).total_seconds() < 0.5
    assert all((starts[i + 4] - starts[i]).total_seconds() >= 0.9 for i in range(4))


def test_a_worker_says_when_its_threads_outnumber_djangos_pool(workers: Workers) -> None:
    # jobsite's JOBSITE_DB_POOL=1: a pool of at most 20 connections, a 10 s timeout.
    workers.start("--queues", "threads", "--concurrency", "50", env={"JOBSITE_DB_POOL": "1"})
    workers.start("--queues", "threads", "--concurrency", "20", env={"JOBSITE_DB_POOL": "1"})
    wait_for(
        lambda: workers.output().count(" started: ") == 2 or None,
        timeout=20,
        message="both workers to start",
    )
    big, small = (path.read_text() for path in workers.logs)
    assert "--concurrency 50 is more than the 20 connections of database 'default'" in big
    assert "after the pool's timeout (10 s)" in big
    assert "more than the" not in small


def test_the_worker_keeps_its_start_up_heap_off_the_garbage_collector(workers: Workers) -> None:
    # Django and the handlers' modules, walked again by every full collection with the
    # GIL held, would stall every lane and handler thread for tens of milliseconds.
    workers.start("--queues", "threads", "--concurrency", "1")
    heap = ran(records([jobs.heap.enqueue().id])[0])
    assert heap["frozen"] > 20_000, heap
    assert heap["walked"] < heap["frozen"] / 2, heap


def ran(rec: JobRecord) -> dict[str, Any]:
    """What a job returned: tests.backend its backend pid and thread, tests.heap its
    process's collector counts."""
    assert isinstance(rec.result, dict), rec.result
    return rec.result


def _backend_alive(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone() is not None
