"""Roll ended jobs up into minute and hour metric buckets, incrementally.

A watermark (RollupState "metrics") says how far buckets are final. Only closed
minutes are rolled up: once a minute has been over for SETTLED, a pass computes, from
the history rows, the minute buckets from the watermark up to the end of that minute,
then the hour buckets those minutes belong to, then moves the watermark to the end of
the last closed minute. The minute before the watermark is computed again when the
history holds more of its rows than its buckets count (rows committed a little after
their finish time); a paced pass counts them only when the pass before it may have
missed some (Whole). A pass that finds no newly closed minute reads nothing, and the
open minute is left to readers (reads.SERIES reads history after the watermark).
Counts and sums are exact; a bucket's percentiles come from a fixed sample of at most
about SAMPLE of its rows (all of them below that), so that a busy minute costs a scan
and a small hash table rather than sorts of every row. Recomputing replaces buckets,
so a pass can be repeated or interrupted without counting anything twice. A first
rollup over a long history goes in chunks of history, one transaction each, sized to
take well under a second.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from queue_engine import sql
from queue_engine.worker.services import rollup_slices
from queue_engine.worker.services.background import Background

log = logging.getLogger("queue_engine.worker")

LATE_MARGIN = timedelta(minutes=1)
# A minute is rolled up once it has been over this long: the settles that finished jobs
# in it (finished_at is their transaction's start) have committed by then.
SETTLED = timedelta(seconds=5)
CHUNK = timedelta(hours=1)  # history per pass when catching up; adapted to keep passes short
# A pass starts LATE_MARGIN before the watermark: the smallest chunk must reach past it, or
# a pass on a slow database would end where it started and the rollup would stall.
MIN_CHUNK, MAX_CHUNK = LATE_MARGIN + timedelta(minutes=1), timedelta(days=1)
FAST_PASS, SLOW_PASS = 0.1, 0.4  # seconds
TIME_BUDGET = 0.5  # seconds per call; the leader has other work too
KEEP_MINUTES = 3 * 86400  # minute buckets serve windows up to 50 hours (900 s steps)
KEEP_HOURS = 400 * 86400
PRUNE_BATCH = 5000
# Rows per minute bucket whose waits and runs give its percentiles; the p95 of a sample
# this size is within a few tenths of a percentile point of the whole minute's.
SAMPLE = 10_000
SAMPLE_SPACE = 1 << 20  # the range of the row hash sql.SET_MINUTE_PERCENTILES samples by
PACED_SPAN = timedelta(minutes=2)  # a pass this short may be paced (Rollup)
PACED_BUDGET = 60.0  # seconds a paced call may go on (in the background)


@dataclass
class Whole:
    """Up to when the last paced pass read a history that nothing could add to any more:
    when its reading began, no transaction that started before that moment was open (a
    row's finished_at is its settle's transaction start). The next pass need not count
    the minute before the watermark again, a third of a busy pass's reading."""

    through: datetime | None = None


@dataclass(frozen=True)
class RolledUp:
    rolled_up_to: datetime | None
    passes: int
    more: bool


async def roll_up(
    conn: psycopg.AsyncConnection,
    *,
    budget: float = TIME_BUDGET,
    pace: bool = False,
    whole: Whole | None = None,
) -> RolledUp:
    """Passes until caught up or past `budget` seconds. With `pace`, a pass of at most
    PACED_SPAN reads its minutes a slice at a time (rollup_slices), for a connection
    of the rollup's own: a paced pass takes seconds. `whole` carries from one paced
    pass to the next how far the history was read whole."""
    deadline = time.monotonic() + budget
    await conn.execute(sql.ENSURE_ROLLUP_STATE)
    await summarize_new_history(conn)
    passes, chunk = 0, CHUNK
    while True:
        started = time.monotonic()
        watermark, caught_up = await _one_pass(conn, chunk, pace=pace, whole=whole)
        passes += 1
        took = time.monotonic() - started
        if took < FAST_PASS:
            chunk = min(chunk * 2, MAX_CHUNK)
        elif took > SLOW_PASS:
            chunk = max(chunk / 2, MIN_CHUNK)
        if caught_up:
            await _prune(conn)
            return RolledUp(watermark, passes, more=False)
        if time.monotonic() > deadline:
            return RolledUp(watermark, passes, more=True)


async def _one_pass(
    conn: psycopg.AsyncConnection,
    chunk: timedelta,
    *,
    pace: bool = False,
    whole: Whole | None = None,
) -> tuple[datetime | None, bool]:
    if pace:
        cur = await conn.execute(sql.ROLLED_UP_TO)
        row = await cur.fetchone()
        if row is not None and row[0] is not None:
            watermark, closed = row[0], _minute(row[1] - SETTLED)
            if watermark < closed <= watermark + PACED_SPAN:
                return await _paced_pass(conn, watermark, closed, whole or Whole())
    async with conn.transaction():
        for setting in sql.ROLLUP_SETTINGS:
            await conn.execute(setting)
        cur = await conn.execute(sql.LOCK_ROLLUP_STATE)
        row = await cur.fetchone()
        assert row is not None
        watermark, now = row
        closed = _minute(now - SETTLED)  # the end of the last closed minute
        if watermark is None:
            cur = await conn.execute(sql.OLDEST_FINISHED)
            oldest = (await cur.fetchone() or (None,))[0]
            start = _minute(oldest or now)
            if closed <= start:  # nothing before the open minute: nothing to count yet
                await conn.execute(sql.SET_ROLLED_UP_TO, [start])
                return start, True
        elif closed <= watermark:
            return watermark, True  # no minute closed since the last pass
        else:
            start = watermark
            previous = {"start": watermark - LATE_MARGIN, "end": watermark}
            cur = await conn.execute(sql.UNCOUNTED_ROWS, previous)
            if (await cur.fetchone() or (False,))[0]:
                start = _minute(watermark - LATE_MARGIN)
        # Whole minutes: a pass that stopped inside a minute would leave the next one to
        # insert that minute's bucket again (a halved chunk is 7.5 minutes, then less).
        end = min(closed, _minute(start + chunk))
        await _minute_buckets(conn, start, end)
        hours = {"size": 3600, "start": start.replace(minute=0), "end": end}
        await conn.execute(sql.DELETE_BUCKETS, hours)
        await conn.execute(sql.INSERT_HOUR_BUCKETS, hours)
        await conn.execute(sql.SET_ROLLED_UP_TO, [end])
    return end, end >= closed


async def _paced_pass(
    conn: psycopg.AsyncConnection, watermark: datetime, closed: datetime, whole: Whole
) -> tuple[datetime | None, bool]:
    """The minutes from the watermark to `closed` (and the one before the watermark, when
    its rows changed), read in slices outside any transaction, then written with the
    watermark in one short one, unless another pass moved the watermark meanwhile.

    The minute before the watermark is counted again only when the pass that read it may
    have missed rows: when a transaction that started before its end was still open."""
    start, before = watermark, watermark - LATE_MARGIN
    if whole.through != watermark:
        cur = await conn.execute(sql.COUNTED_ROWS, {"start": before, "end": watermark})
        counted = int((await cur.fetchone() or (0,))[0])
        if await rollup_slices.count_rows(conn, before, watermark) != counted:
            start = before
    whole.through = None
    cur = await conn.execute(sql.NOTHING_OPEN_BEFORE, {"moment": closed})
    read_whole = bool((await cur.fetchone() or (False,))[0])
    figures = await rollup_slices.read_minutes(
        conn, start, closed, sample=SAMPLE, space=SAMPLE_SPACE
    )
    async with conn.transaction():
        cur = await conn.execute(sql.LOCK_ROLLUP_STATE)
        row = await cur.fetchone()
        if row is None or row[0] != watermark:
            return (row[0] if row else None), False
        await conn.execute(sql.DELETE_BUCKETS, {"size": 60, "start": start, "end": closed})
        if figures:
            await conn.execute(sql.INSERT_MINUTE_FIGURES, _columns(figures))
        hours = {"size": 3600, "start": start.replace(minute=0), "end": closed}
        await conn.execute(sql.DELETE_BUCKETS, hours)
        await conn.execute(sql.INSERT_HOUR_BUCKETS, hours)
        await conn.execute(sql.SET_ROLLED_UP_TO, [closed])
    if read_whole:
        whole.through = closed
    return closed, True


def _columns(figures: dict[rollup_slices.Key, rollup_slices.Figures]) -> dict[str, list[Any]]:
    """INSERT_MINUTE_FIGURES's parameters: one list per column."""
    percentile = rollup_slices.percentile_cont
    rows = [
        (
            minute,
            queue,
            kind,
            f.succeeded,
            f.failed,
            f.cancelled,
            f.retried,
            f.timed,
            f.wait_sum,
            f.run_sum,
            percentile(f.waits, 0.5),
            percentile(f.waits, 0.95),
            percentile(f.runs, 0.5),
            percentile(f.runs, 0.95),
            f.rescued,
        )
        for (minute, queue, kind), f in figures.items()
    ]
    names = [
        "bucket",
        "queue",
        "kind",
        "succeeded",
        "failed",
        "cancelled",
        "retried",
        "timed",
        "wait_sum",
        "run_sum",
        "wait_p50",
        "wait_p95",
        "run_p50",
        "run_p95",
        "rescued",
    ]
    return {name: list(values) for name, values in zip(names, zip(*rows, strict=True), strict=True)}


class Rollup(Background):
    """The leader's rollup service. Catching up (a first rollup, or after the leader was
    away) runs on the leader's connection in budgeted passes, as `roll_up` does; once
    caught up, each pass is paced (rollup_slices) and runs in the background on a
    connection of its own, so that the leader's other services (promotion every half
    second) never wait for it."""

    name = "rollup"
    interval = 10.0

    def __init__(self, conninfo: str) -> None:
        super().__init__(conninfo)
        self.whole = Whole()

    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        rolled = await self.step(conn)
        return rolled is not None and rolled.more

    async def step(self, conn: psycopg.AsyncConnection) -> RolledUp | None:
        """Roll up inline while catching up (what `roll_up` says); None once caught
        up, when the pass runs in the background."""
        if self.running():
            return None
        cur = await conn.execute(sql.ROLLED_UP_TO)
        row = await cur.fetchone()
        if row is not None and row[0] is not None:
            watermark, now = row
            if _minute(now - SETTLED) - watermark <= PACED_SPAN:
                self.start(self.paced())
                return None
        return await roll_up(conn)

    async def paced(self) -> None:
        try:
            conn = await self.connection.get()
            await roll_up(conn, pace=True, budget=PACED_BUDGET, whole=self.whole)
        except psycopg.Error as exc:
            log.warning("metrics rollup failed: %s", exc)
            await self.connection.lost(exc)


async def _minute_buckets(conn: psycopg.AsyncConnection, start: datetime, end: datetime) -> None:
    minutes = {"size": 60, "start": start, "end": end}
    await conn.execute(sql.DELETE_BUCKETS, minutes)
    cur = await conn.execute(sql.INSERT_MINUTE_COUNTS, minutes)
    timed = [row for row in await cur.fetchall() if row[3]]
    if not timed:
        return
    keep = [rollup_slices.threshold(count, SAMPLE, SAMPLE_SPACE) for _, _, _, count in timed]
    await conn.execute(
        sql.SET_MINUTE_PERCENTILES,
        {
            "start": start,
            "end": end,
            "minutes": [minute for minute, _, _, _ in timed],
            "queues": [queue for _, queue, _, _ in timed],
            "kinds": [kind for _, _, kind, _ in timed],
            "keep": keep,
            "most": max(keep),
        },
    )


async def summarize_new_history(conn: psycopg.AsyncConnection) -> None:
    """Summarize the history pages appended since the last pass in the BRIN index on
    finished_at (sql.SUMMARIZE_FINISHED), which the rollup, retention and the console's
    charts read by. Skipped while a vacuum of the history holds the lock it needs, or
    when this connection does not own the table (autovacuum's summaries then serve)."""
    try:
        async with conn.transaction():
            await conn.execute(sql.SUMMARIZE_LOCK_TIMEOUT)
            await conn.execute(sql.SUMMARIZE_FINISHED)
    except (psycopg.errors.LockNotAvailable, psycopg.errors.InsufficientPrivilege) as exc:
        log.debug("history summaries left for later: %s", exc)


def _minute(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


async def _prune(conn: psycopg.AsyncConnection) -> None:
    for size, keep in ((60, KEEP_MINUTES), (3600, KEEP_HOURS)):
        while True:
            cur = await conn.execute(
                sql.PRUNE_BUCKETS, {"size": size, "keep": keep, "limit": PRUNE_BATCH}
            )
            if cur.rowcount < PRUNE_BATCH:
                break
