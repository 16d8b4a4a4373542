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

None of these vacuums gives the empty pages at a table's end back to the file system
(TRUNCATE false; the tables' vacuum_truncate is off too, for autovacuum: migration
0002). Cutting them off takes an exclusive lock on the table, which every claim, settle
and enqueue waits behind, and a table that jobs go through fills those pages again
within seconds.

The same goes for the other tables the engine deletes from row by row (TABLES): the
steps of the jobs that retention removes, the flows that go with their last node and
their edges. (The log lines' table is partitioned by time instead: the space of the
lines deleted comes back when their leaf is dropped; queue_engine.schema.partitions.) Without a vacuum the space they leave is never used again, and
on a database whose autovacuum is off or slow they grow for good.
"""

from __future__ import annotations

import logging
import time

import psycopg

from queue_engine import sql
from queue_engine.worker.services.background import Background

log = logging.getLogger("queue_engine.worker")

CHECK_INTERVAL = 2.0  # seconds between two looks at the statistics
MIN_DEAD = 10_000
SHARE = 0.1  # of the live rows
SPACING = 1.0  # a vacuum of t seconds is followed by no other for SPACING * t
LIVE = "queue_engine_job"
TABLES = (
    LIVE,
    "queue_engine_jobstep",
    "queue_engine_flow",
    "queue_engine_flowedge",
)


class LiveTableVacuum(Background):
    """A leader service: see the module's docstring."""

    name = "vacuum"
    interval = CHECK_INTERVAL

    def __init__(self, conninfo: str, tables: tuple[str, ...] = TABLES) -> None:
        super().__init__(conninfo)
        self.not_before = float("-inf")
        self.tables = tables
        self.left = dict.fromkeys(tables, 0)  # dead rows the last vacuum could not remove
        self.vacuums = 0  # of the live table

    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        if self.running() or time.monotonic() < self.not_before:
            return False
        if tables := await self.due(conn):
            self.start(self.vacuum(tables))
        return False

    async def due(self, conn: psycopg.AsyncConnection) -> list[str]:
        """The tables whose dead rows call for a vacuum. None without statistics
        (track_counts off), when autovacuum cannot run either."""
        return [
            table
            for table, dead, live in await self._rows(conn, self.tables)
            if dead is not None and dead - self.left[table] >= max(MIN_DEAD, SHARE * live)
        ]

    async def vacuum(self, tables: list[str]) -> None:
        started = time.monotonic()
        try:
            conn = await self.connection.get()
            for table in tables:
                await conn.execute(f"VACUUM (SKIP_LOCKED, TRUNCATE false) {table}")  # type: ignore[arg-type]  # fixed names
            for table, dead, _ in await self._rows(conn, tuple(tables)):
                self.left[table] = dead or 0
            self.vacuums += LIVE in tables
            log.debug("vacuumed %s in %.3f s", ", ".join(tables), time.monotonic() - started)
        except psycopg.Error as exc:
            log.warning("vacuum of %s failed: %s", ", ".join(tables), exc)
            await self.connection.lost(exc)
        finally:
            self.not_before = time.monotonic() + SPACING * (time.monotonic() - started)

    @staticmethod
    async def _rows(
        conn: psycopg.AsyncConnection, tables: tuple[str, ...]
    ) -> list[tuple[str, int | None, int]]:
        cur = await conn.execute(sql.TABLE_ROWS, [list(tables)])
        return [(str(t), d, int(live or 0)) for t, d, live in await cur.fetchall()]
