"""History rows made by hand, and the database's clock, for tests of what reads, sweeps
and partitions the history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

from django.db import connection

from queue_engine.models import FlowRun, JobLog, JobRecord, RollupState

# History rows are moved jobs, whose ids they keep: ids given here start far above any
# job a test enqueues.
RECORD_IDS = count(1_000_000)


def database_now() -> datetime:
    """The database's now(): the start of the current transaction, as the sweeps and
    reads under test see it (not clock_timestamp(), which moves within one)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        now: datetime = cursor.fetchone()[0]
    return now.astimezone(UTC)


def clock_now() -> datetime:
    """The database's clock_timestamp(): the time now, which moves within a transaction
    (what the worker's own timestamps, started_at and the like, are read from)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        now: datetime = cursor.fetchone()[0]
    return now.astimezone(UTC)


def history_row(
    finished: datetime,
    *,
    queue: str = "gc",
    state: str = "succeeded",
    kind: str = "tests.noop",
    wait: float = 0.5,
    run: float | None = 1.0,
    attempt: int = 1,
    flow: FlowRun | None = None,
    group_key: str | None = None,
) -> JobRecord:
    """An unsaved history row that finished at `finished`, after waiting `wait` seconds and
    running `run` (None: it never started)."""
    started = None if run is None else finished - timedelta(seconds=run)
    run_at = (started or finished) - timedelta(seconds=wait)
    return JobRecord(
        id=next(RECORD_IDS),
        queue=queue,
        kind=kind,
        state=state,
        attempt=attempt,
        flow_id=flow.pk if flow else None,
        group_key=group_key,
        run_at=run_at,
        created_at=run_at,
        started_at=started,
        finished_at=finished,
    )


def with_logs(records: list[JobRecord]) -> list[JobRecord]:
    """Save these history rows, each with one log line."""
    JobRecord.objects.bulk_create(records)
    JobLog.objects.bulk_create(
        JobLog(job_id=r.id, attempt=1, seq=1, stream="log", text="hi") for r in records
    )
    return records


def rolled_up_to(moment: datetime | None) -> None:
    """Set the metrics rollup's watermark, as if it had counted everything before it."""
    RollupState.objects.update_or_create(name="metrics", defaults={"rolled_up_to": moment})
