"""Fire due schedules: one job per fire time, however many leaders and restarts.

For each due schedule, in one transaction: the job is inserted with the dedup
key `schedule:<name>:<fire time>` and the schedule moves to its next fire time,
fenced on the fire time it was read at. The row is locked (SKIP LOCKED) while
that happens, so a second firer skips it, and a crash before commit leaves both
undone for the next leader.

Missed fire times (everything was down, or the schedule's leader was slow) are
never replayed one by one: `run_once` enqueues a single job for the latest of
them (its meta says how many it stands for); `skip` enqueues nothing unless the
latest is less than MISFIRE_GRACE late.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from queue_engine import sql
from queue_engine.enqueueing.dedup import DEDUP_ATTEMPTS, insert_or_find_holder_async
from queue_engine.enqueueing.prepare import prepare
from queue_engine.exceptions import EnqueueError
from queue_engine.schedules.api import fire_spec
from queue_engine.schedules.recurrence import Due, Recurrence
from queue_engine.worker.services.service import Service

log = logging.getLogger("queue_engine.worker")

MISFIRE_GRACE = timedelta(seconds=60)
RETRY_BROKEN_TIMING = timedelta(hours=1)
BATCH = 100


@dataclass(frozen=True)
class Fired:
    enqueued: int
    skipped: int
    more: bool


@dataclass(frozen=True)
class DueRow:
    id: int
    name: str
    kind: str
    payload: Any
    queue: str | None
    priority: int | None
    recurrence: Recurrence
    missed_fire_policy: str
    next_fire_at: datetime
    now: datetime

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> DueRow:
        (
            id_,
            name,
            kind,
            payload,
            queue,
            priority,
            every,
            cron,
            timezone,
            policy,
            next_fire_at,
            now,
        ) = row
        return cls(
            id_,
            name,
            kind,
            payload,
            queue,
            priority,
            Recurrence(every=every, cron=cron, timezone=timezone),
            policy,
            next_fire_at,
            now,
        )


async def fire_due_schedules(conn: psycopg.AsyncConnection, *, limit: int = BATCH) -> Fired:
    enqueued = skipped = 0
    # Every leader tick asks; most ticks nothing is due: one round trip, no transaction.
    probe = await (await conn.execute(sql.ANY_DUE_SCHEDULE)).fetchone()
    if not (probe and probe[0]):
        return Fired(0, 0, more=False)
    async with conn.transaction():
        cur = await conn.execute(sql.SELECT_DUE_SCHEDULES, {"limit": limit})
        rows = [DueRow.of(row) for row in await cur.fetchall()]
        for row in rows:
            job_id = await _fire(conn, row)
            if job_id is None:
                skipped += 1
            else:
                enqueued += 1
    return Fired(enqueued, skipped, more=len(rows) >= limit)


async def _fire(conn: psycopg.AsyncConnection, row: DueRow) -> int | None:
    """Enqueue this schedule's job for its latest due fire time; None when nothing was."""
    try:
        due = row.recurrence.due(row.next_fire_at, row.now)
    except Exception as exc:  # a timing that no longer computes (a time zone gone, say)
        log.error("schedule %s: %s; trying again in an hour", row.name, exc)
        await _pass(conn, row, row.now + RETRY_BROKEN_TIMING, str(exc))
        return None
    if row.missed_fire_policy == "skip" and row.now - due.fire_time > MISFIRE_GRACE:
        log.info(
            "schedule %s: skipped %d missed fire time(s) up to %s",
            row.name,
            due.missed + 1,
            due.fire_time.isoformat(),
        )
        await _pass(conn, row, due.next_fire_at, "")
        return None
    try:
        prepared = prepare(
            fire_spec(
                name=row.name,
                kind=row.kind,
                payload=row.payload,
                queue=row.queue,
                priority=row.priority,
                fire_time=due.fire_time,
                missed=due.missed,
            )
        )
    except Exception as exc:  # EnqueueError, or the kind's name or group_key function failed
        reason = str(exc) if isinstance(exc, EnqueueError) else f"{type(exc).__name__}: {exc}"
        log.error(
            "schedule %s: cannot enqueue its job for %s: %s",
            row.name,
            due.fire_time.isoformat(),
            reason,
        )
        await _pass(conn, row, due.next_fire_at, reason)
        return None
    try:
        async with conn.transaction():  # a savepoint: one bad schedule spoils no other
            job_id = await _insert(conn, prepared.kind, prepared.dedup_key, prepared.params())
            await _advance(
                conn,
                row,
                next_fire_at=due.next_fire_at,
                fired_at=due.fire_time,
                job_id=job_id,
                error="",
            )
    except (psycopg.OperationalError, psycopg.InterfaceError):
        raise
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())[:500]
        log.error("schedule %s: enqueue failed: %s", row.name, reason)
        await _pass(conn, row, due.next_fire_at, reason)
        return None
    _report(row, due, job_id)
    return job_id


async def _insert(
    conn: psycopg.AsyncConnection, kind: str, dedup_key: str | None, params: dict[str, Any]
) -> int:
    assert dedup_key is not None  # fire_spec always gives one
    for _ in range(DEDUP_ATTEMPTS):
        inserted, holder = await insert_or_find_holder_async(
            conn, sql.INSERT_JOB_DEDUP, params, kind, dedup_key
        )
        if inserted is not None:
            return int(inserted[0])
        if holder is not None:  # this fire time's job is already there
            return holder
    raise psycopg.errors.UniqueViolation(f"dedup key {dedup_key!r} kept changing hands")


async def _advance(
    conn: psycopg.AsyncConnection,
    row: DueRow,
    *,
    next_fire_at: datetime,
    fired_at: datetime | None,
    job_id: int | None,
    error: str,
) -> None:
    await conn.execute(
        sql.ADVANCE_SCHEDULE,
        {
            "id": row.id,
            "expected": row.next_fire_at,
            "next_fire_at": next_fire_at,
            "fired_at": fired_at,
            "job_id": job_id,
            "error": error,
        },
    )


async def _pass(
    conn: psycopg.AsyncConnection, row: DueRow, next_fire_at: datetime, error: str
) -> None:
    """Move the schedule on without a job this time, noting why (`error`, or "")."""
    await _advance(conn, row, next_fire_at=next_fire_at, fired_at=None, job_id=None, error=error)


def _report(row: DueRow, due: Due, job_id: int) -> None:
    if due.missed:
        log.info(
            "schedule %s: job %s for %s stands for %d missed fire time(s) too",
            row.name,
            job_id,
            due.fire_time.isoformat(),
            due.missed,
        )
    else:
        log.debug("schedule %s: job %s for %s", row.name, job_id, due.fire_time.isoformat())


class Scheduler(Service):
    name = "scheduler"
    interval = 0.0  # every leader tick: a schedule fires at most a tick late

    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        return (await fire_due_schedules(conn)).more
