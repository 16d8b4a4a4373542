"""Delete ended jobs past their queue's retention window, in short batches: the rows
the history's partitions cannot drop whole (queue_engine.schema.partitions).

A queue whose window is shorter than the longest its state has is swept here, in all
of that state's leaves; every other queue only in the state's default leaf, as the
leaf a row is in goes whole once the longest window has passed.

Each batch is one transaction of at most `batch_size` history rows (and their
log lines), so the collector never holds a long transaction or snapshot, which
would slow every claim in the database. Rows the metrics rollup has not
counted yet are kept until it has.

finished_at has a BRIN index, which finds a time range cheaply but reads every
row of it: the leader's collector remembers, per queue and state, up to when it
has already swept, and only reads from there on (with a margin for stragglers),
sweeping everything again once an hour.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psycopg

from queue_engine import sql
from queue_engine.schema import partitions as history
from queue_engine.states import ENDED_STATES
from queue_engine.worker.services.service import Service

BATCH_SIZE = 5000
TIME_BUDGET = 0.5  # seconds per call; the leader has other work too
MARGIN = timedelta(hours=1)
FULL_SWEEP_EVERY = 3600.0  # seconds


@dataclass(frozen=True)
class Collected:
    deleted: int
    batches: int
    more: bool


@dataclass
class Swept:
    """How far each (queue, state) was swept clean, remembered between calls."""

    until: dict[tuple[str, str], datetime] = field(default_factory=dict)
    full_sweep_at: float = float("-inf")


async def delete_expired(
    conn: psycopg.AsyncConnection,
    *,
    batch_size: int = BATCH_SIZE,
    budget: float = TIME_BUDGET,
    swept: Swept | None = None,
) -> Collected:
    deadline = time.monotonic() + budget
    if swept is not None and time.monotonic() - swept.full_sweep_at > FULL_SWEEP_EVERY:
        swept.until.clear()
        swept.full_sweep_at = time.monotonic()
    deleted = batches = 0
    cur = await conn.execute(sql.RETENTION_WINDOWS)
    windows = await cur.fetchall()
    cur = await conn.execute(sql.HISTORY_WINDOWS)
    longest = history.longest_windows(await cur.fetchall())
    for queue, *keeps in windows:
        for state, keep in zip(ENDED_STATES, keeps, strict=True):
            table = (
                history.state_table(state) if keep < longest[state] else history.default_leaf(state)
            )
            since = swept.until.get((queue, state)) if swept is not None else None
            while True:
                if time.monotonic() > deadline:
                    return Collected(deleted, batches, more=True)
                async with conn.transaction():
                    cur = await conn.execute(
                        sql.delete_expired_batch(table),  # type: ignore[arg-type]  # fixed names
                        {
                            "queue": queue,
                            "state": state,
                            "keep": keep,
                            "limit": batch_size,
                            "since": since - MARGIN if since is not None else None,
                        },
                    )
                    rows = await cur.fetchall()
                if rows:
                    batches += 1
                    deleted += len(rows)
                if len(rows) < batch_size:
                    if swept is not None and (cutoff := await _cutoff(conn, keep)):
                        swept.until[(queue, state)] = cutoff
                    break
    return Collected(deleted, batches, more=False)


async def _cutoff(conn: psycopg.AsyncConnection, keep: int) -> datetime | None:
    """Up to when this window is swept clean; None before the rollup's first watermark."""
    cur = await conn.execute(sql.RETENTION_CUTOFF, {"keep": keep})
    row = await cur.fetchone()
    assert row is not None
    cutoff: datetime | None = row[0]
    return cutoff


class Retention(Service):
    name = "retention"
    interval = 60.0

    def __init__(self) -> None:
        self.swept = Swept()

    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        return (await delete_expired(conn, swept=self.swept)).more
