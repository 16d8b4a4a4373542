"""The rollup's steady pass, read in slices: a busy minute without a burst.

Once the rollup has caught up, each pass computes one or two minutes. Read in one
statement, a minute of a busy fleet (a million rows) takes one of the database's cores
for a second or more, and on a small machine the workers' claims and settles queue
behind it. Read here in SLICE-long ranges, one short statement at a time with a pause
after each (PAUSE times as long as it took), it takes the same work spread over a few
seconds: each slice's counts and sums are added up, and each bucket's percentiles are
those of its rows in the fixed sample the set-based pass uses (sql.SET_MINUTE_PERCENTILES),
here sorted in Python. The rows are then written, with the watermark, in one short
transaction (rollup._write_paced)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from queue_engine import sql

SLICE = timedelta(seconds=10)  # a divisor of a minute: a slice never spans two
PAUSE = 2.0  # after a slice, a pause this many times as long as it took


@dataclass
class Figures:
    """One minute bucket's figures as the slices add them up."""

    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    retried: int = 0
    timed: int = 0
    wait_sum: float = 0.0
    run_sum: float = 0.0
    rescued: int = 0
    waits: list[float] = field(default_factory=list)
    runs: list[float] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return self.succeeded + self.failed + self.cancelled


type Key = tuple[datetime, str, str]  # (minute, queue, kind)


async def count_rows(conn: psycopg.AsyncConnection, start: datetime, end: datetime) -> int:
    """History rows that finished in [start, end), counted a slice at a time."""
    total = 0
    for a, b in _slices(start, end):
        rows = await _paced(conn, sql.SLICE_ROWS, {"start": a, "end": b})
        total += int(rows[0][0])
    return total


async def read_minutes(
    conn: psycopg.AsyncConnection, start: datetime, end: datetime, *, sample: int, space: int
) -> dict[Key, Figures]:
    """The figures of every minute bucket in [start, end), minute-aligned."""
    figures: dict[Key, Figures] = {}
    for a, b in _slices(start, end):
        rows = await _paced(conn, sql.SLICE_COUNTS, {"start": a, "end": b})
        for queue, kind, ok, failed, cancelled, retried, timed, wait, run, rescued in rows:
            f = figures.setdefault((_minute(a), queue, kind), Figures())
            f.succeeded += ok
            f.failed += failed
            f.cancelled += cancelled
            f.retried += retried
            f.timed += timed
            f.wait_sum += wait
            f.run_sum += run
            f.rescued += rescued
    keep = {key: threshold(f.timed, sample, space) for key, f in figures.items() if f.timed}
    if not keep:
        return figures
    most = max(keep.values())
    for a, b in _slices(start, end):
        rows = await _paced(conn, sql.SLICE_SAMPLE, {"start": a, "end": b, "most": most})
        minute = _minute(a)
        for queue, kind, hashed, wait, run in rows:
            key = (minute, queue, kind)
            if hashed < keep.get(key, 0):
                figures[key].waits.append(wait)
                figures[key].runs.append(run)
    return figures


def percentile_cont(values: list[float], fraction: float) -> float | None:
    """Postgres's percentile_cont: linear between the two nearest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def threshold(timed: int, sample: int, space: int) -> int:
    """The row hash (in [0, space)) under which a bucket of `timed` started jobs keeps a
    row in its sample of about `sample` rows: all of them (`space`) up to `sample`."""
    return space if timed <= sample else space * sample // timed


async def _paced(
    conn: psycopg.AsyncConnection, statement: str, params: dict[str, Any]
) -> list[Any]:
    """The statement's rows, then a pause PAUSE times as long as it took."""
    started = time.monotonic()
    async with conn.transaction():
        for setting in sql.ROLLUP_SETTINGS:
            await conn.execute(setting)
        cur = await conn.execute(statement, params)
        rows = await cur.fetchall()
    await asyncio.sleep(PAUSE * (time.monotonic() - started))
    return rows


def _slices(start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    out = []
    at = start
    while at < end:
        out.append((at, min(at + SLICE, end)))
        at += SLICE
    return out


def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)
