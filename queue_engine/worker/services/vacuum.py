"""Vacuums the live job table when its dead rows pile up, whatever autovacuum does.

Every job leaves two dead row versions in queue_engine_job (the claim's update, which
cannot be a HOT update since `state` decides which partial indexes hold the row, and
the settle's delete) and dead entries in its indexes. The claim walks its index from
the head of each queue: until VACUUM removes the entries of jobs already claimed, every
claim steps over them, and a long drain slows as it goes while the table doubles.
Autovacuum visits a database at most once a minute (autovacuum_naptime), may be
throttled, and may be off; a drain of a million jobs is over before it comes.

So the leader reads the table's dead and live rows from the statistics every
CHECK_INTERVAL seconds and, when the dead rows added since its last vacuum pass
max(MIN_DEAD, SHARE * live rows), runs `VACUUM (SKIP_LOCKED)` on a connection of its
own: the other services (promotion, rescues) go on meanwhile, and a vacuum autovacuum
or an operator is already running is not waited for. Dead rows a vacuum could not
remove (a long transaction elsewhere holds them) do not count towards the next one,
and a vacuum that took t seconds is followed by no other for SPACING * t.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import psycopg

from queue_engine import sql
from queue_engine.worker.store import Connection

log = logging.getLogger("queue_engine.worker")

CHECK_INTERVAL = 2.0  # seconds between two looks at the statistics
MIN_DEAD = 10_000
SHARE = 0.1  # of the live rows
SPACING = 1.0  # a vacuum of t seconds is followed by no other for SPACING * t


class LiveTableVacuum:
    """A leader service: see the module's docstring."""

    def __init__(self, conninfo: str) -> None:
        self.connection = Connection(conninfo, "vacuum")
        self.task: asyncio.Task[None] | None = None
        self.not_before = float("-inf")
        self.left = 0  # dead rows the last vacuum could not remove
        self.vacuums = 0

    async def __call__(self, conn: psycopg.AsyncConnection) -> None:
        if self.task is not None and not self.task.done():
            return
        if time.monotonic() < self.not_before:
            return
        if await self.due(conn):
            self.task = asyncio.create_task(self.vacuum(), name="queue_engine vacuum")

    async def due(self, conn: psycopg.AsyncConnection) -> bool:
        cur = await conn.execute(sql.LIVE_TABLE_ROWS)
        row = await cur.fetchone()
        if row is None or row[0] is None:
            return False  # no statistics (track_counts off): autovacuum cannot run either
        dead, live = int(row[0]), int(row[1] or 0)
        return dead - self.left >= max(MIN_DEAD, SHARE * live)

    async def vacuum(self) -> None:
        started = time.monotonic()
        try:
            conn = await self.connection.get()
            await conn.execute(sql.VACUUM_LIVE_TABLE)
            cur = await conn.execute(sql.LIVE_TABLE_ROWS)
            row = await cur.fetchone()
            self.left = int(row[0] or 0) if row else 0
            self.vacuums += 1
            log.debug("vacuumed the live job table in %.3f s", time.monotonic() - started)
        except psycopg.Error as exc:
            log.warning("vacuum of the live job table failed: %s", exc)
            await self.connection.lost(exc)
        finally:
            self.not_before = time.monotonic() + SPACING * (time.monotonic() - started)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        await self.connection.close()
