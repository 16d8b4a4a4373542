"""CONSOLE_STATEMENT_TIMEOUT is the one timeout of the console's reads, its lists included.

A second connection holds a table's lock for LOCK_HELD seconds, longer than the
tiny timeout these tests set and shorter than any other timeout would be: a
query that waits for the lock past the setting is cancelled, one that waits
under a longer timeout gets its rows once the lock goes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.test import Client

from queue_engine.flows import Flow
from queue_engine.models import Job
from tests.support import jobs

pytestmark = pytest.mark.django_db(transaction=True)

LOCK_HELD = 1.5  # seconds


@contextmanager
def locked(conninfo: str, table: str) -> Iterator[None]:
    """`table` locked against reads by another connection for LOCK_HELD seconds."""
    held = threading.Event()

    def hold() -> None:
        with psycopg.connect(conninfo) as conn:
            conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            held.set()
            threading.Event().wait(LOCK_HELD)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10), "the lock was taken"
        yield
    finally:
        holder.join()


def a_flow() -> int:
    flow = Flow("nightly")
    flow.add("extract", jobs.node, label="extract")
    return flow.submit()


@pytest.fixture
def tiny_timeout(settings) -> None:  # type: ignore[no-untyped-def]
    settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, "CONSOLE_STATEMENT_TIMEOUT": 0.2}


@pytest.mark.parametrize(
    ("url", "table"),
    [("/jobs/", "queue_engine_jobrecord"), ("/flows/", "queue_engine_flow")],
)
def test_a_list_past_the_statement_timeout_asks_to_narrow_the_filter(
    viewer: Client, conninfo: str, tiny_timeout: None, url: str, table: str
) -> None:
    job = Job.objects.create(kind="tests.noop", queue="held")
    flow_id = a_flow()

    with locked(conninfo, table):
        response = viewer.get(url)

    page = response.content.decode()
    assert response.status_code == 200
    assert "This query took too long on a table this size: narrow the filter" in page
    assert f'href="/jobs/{job.id}/"' not in page and f'href="/flows/{flow_id}/"' not in page


def test_a_flow_page_past_the_statement_timeout_says_so(
    viewer: Client, conninfo: str, tiny_timeout: None
) -> None:
    flow_id = a_flow()

    with locked(conninfo, "queue_engine_flow"):
        response = viewer.get(f"/flows/{flow_id}/")

    assert response.status_code == 503
    assert "This page took too long" in response.content.decode()
    assert "0.2 s" in response.content.decode()


def test_a_list_under_the_statement_timeout_waits_for_the_lock(
    viewer: Client, conninfo: str, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.QUEUE_ENGINE = {**settings.QUEUE_ENGINE, "CONSOLE_STATEMENT_TIMEOUT": 10}
    job = Job.objects.create(kind="tests.noop", queue="held")

    with locked(conninfo, "queue_engine_jobrecord"):
        response = viewer.get("/jobs/")

    assert response.status_code == 200
    assert f'href="/jobs/{job.id}/"' in response.content.decode()
