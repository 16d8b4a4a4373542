"""What the step and wait tests count: every step's effect is a committed row in
test_step_runs (tests/support/step_jobs.py), so a test can see how often each ran."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection

from tests.support.step_jobs import STEP_RUNS_TABLE


@pytest.fixture
def step_runs(transactional_db: None) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_step_runs")
        cursor.execute(STEP_RUNS_TABLE)
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_step_runs")


def runs(job_id: int) -> list[tuple[str, int]]:
    """(step, attempt) for every time a step's function ran, in order."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT step, attempt FROM test_step_runs WHERE job_id = %s AND step <> 'go'"
            " ORDER BY seq",
            [job_id],
        )
        return list(cursor.fetchall())
