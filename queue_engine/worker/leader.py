"""Leader services: exactly one process of the fleet runs them at a time.

Leadership is a session advisory lock held on a dedicated connection: when the
holder dies, Postgres drops the lock and another worker takes over at its next
try (every ELECTION_INTERVAL seconds).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import psycopg

from queue_engine import sql, sql_flows
from queue_engine.worker import services
from queue_engine.worker.outage import retry_waits
from queue_engine.worker.store import Connection

if TYPE_CHECKING:
    from queue_engine.worker.runtime import Worker

log = logging.getLogger("queue_engine.worker")

ELECTION_INTERVAL = 1.0
PROMOTE_INTERVAL = 0.5  # scheduled jobs start at most about this late
RESCUE_INTERVAL = 1.0
SWEEP_INTERVAL = 30.0
STALE_WORKER_AFTER = 60.0
BATCH = 1000
LEADER_CHUNKS = 10  # FlowRelease chunks the leader counts down per tick


async def count_down_more(
    conn: psycopg.AsyncConnection,
    chunk: int,
    on_chunk: Callable[[int], None] | None = None,
    most: int | None = None,
) -> int:
    """Count down the children settles left to count in chunks (FlowRelease rows, see
    sql_flows.COUNT_DOWN_MORE), a chunk per transaction, until no row is left that
    another connection is not counting already (or after `most` chunks). Returns the
    children released."""
    released = 0
    chunks = 0
    while most is None or chunks < most:
        chunks += 1
        async with conn.transaction():
            cur = await conn.execute(sql_flows.COUNT_DOWN_MORE, {"chunk": chunk})
            row = await cur.fetchone()
        assert row is not None
        found, count, _, flows = row
        if not found:
            return released
        released += count
        if flows:  # after the commit, as after a settle
            await conn.execute(sql_flows.RELEASE_COUNTED, [flows])
        if on_chunk is not None:
            on_chunk(count)
    return released


class Leader:
    def __init__(self, worker: Worker, connection: Connection) -> None:
        self.worker = worker
        self.connection = connection
        self.is_leader = False
        self._last_rescue = 0.0
        self._last_sweep = 0.0

    async def run(self) -> None:
        waits = retry_waits()
        while True:
            try:
                conn = await self.connection.get()
                if not self.is_leader:
                    cur = await conn.execute(sql.TRY_LEADER_LOCK, [sql.LEADER_LOCK_KEY])
                    row = await cur.fetchone()
                    self.is_leader = bool(row and row[0])
                    if self.is_leader:
                        log.info("worker %s is now the leader", self.worker.worker_id)
                if self.is_leader:
                    await self.tick(conn)
                waits = retry_waits()  # this went through: the next failure retries at once
                await asyncio.sleep(PROMOTE_INTERVAL if self.is_leader else ELECTION_INTERVAL)
            except asyncio.CancelledError:
                raise
            except psycopg.Error as exc:
                # Closing the connection releases the lock: another worker may win it now,
                # or this one again as soon as Postgres answers.
                if self.is_leader:
                    log.debug("worker %s: leadership dropped", self.worker.worker_id)
                self.is_leader = False
                await self.connection.lost(exc)
                await asyncio.sleep(next(waits))

    async def tick(self, conn: psycopg.AsyncConnection) -> None:
        await self._promote(conn)
        now = time.monotonic()
        if now - self._last_rescue >= RESCUE_INTERVAL:
            self._last_rescue = now
            await self._rescue(conn)
            # What a crashed worker's settles left to count (a few chunks a tick, so
            # that a huge fan-out does not hold up the other services), then what it
            # counted but did not release.
            released = await count_down_more(conn, self.worker.flow_chunk, most=LEADER_CHUNKS)
            if released:  # often only ahead of the worker doing it: no news for the log
                log.debug("released %d flow node(s) a settle had left to count", released)
            await self._release_counted(conn)
        if now - self._last_sweep >= SWEEP_INTERVAL:
            self._last_sweep = now
            await conn.execute(sql.SWEEP_STALE_WORKERS, [STALE_WORKER_AFTER])
            await conn.execute(sql.PRUNE_CLAIM_LOG)
        await services.fire_schedules(conn)
        await services.roll_up_metrics(conn)
        await services.collect_garbage(conn)

    async def promote_due(self) -> int:
        """Promote due scheduled jobs now (burst mode); any worker may do it."""
        return await self.worker.aux.run(self._promote, what="promote")

    async def _promote(self, conn: psycopg.AsyncConnection) -> int:
        total = 0
        while True:
            cur = await conn.execute(sql.PROMOTE_SCHEDULED, {"limit": BATCH})
            count = cur.rowcount
            total += count
            if count < BATCH:
                return total

    async def _rescue(self, conn: psycopg.AsyncConnection) -> None:
        flows: list[int] = []
        async with conn.transaction():
            cur = await conn.execute(
                sql.RESCUE_EXPIRED,
                {
                    "limit": BATCH,
                    "max_rescues": self.worker.options.max_rescues,
                },
            )
            rows = await cur.fetchall()
            revived = sorted({queue for what, _, queue in rows if what == "revived"})
            if revived:
                await conn.execute(sql.NOTIFY_QUEUES, [revived])
            dead = [job_id for what, job_id, _ in rows if what in ("dead", "cancelled")]
            if dead:
                cur = await conn.execute(sql_flows.FLOWS_OF_RECORDS, [dead])
                flows = [row[0] for row in await cur.fetchall()]
                if flows:
                    await conn.execute(sql_flows.REFRESH_FLOWS, [flows])
        if flows:  # again after the commit: see the worker's settle
            await conn.execute(sql_flows.REFRESH_FLOWS, [flows])
        ends = {
            "revived": "back to available",
            "dead": "dead-lettered (rescued too often or out of attempts)",
            "cancelled": "cancelled, as an operator had asked",
        }
        for what, job_id, _ in rows:
            log.warning("job %s: lease expired; %s", job_id, ends[what])

    async def _release_counted(self, conn: psycopg.AsyncConnection) -> None:
        """Release fan-in children a worker counted down but died before releasing
        (see sql_flows.RELEASE_COUNTED), and drop countdown rows nobody needs."""
        cur = await conn.execute(sql_flows.COUNTDOWN_FLOWS)
        flows = [row[0] for row in await cur.fetchall()]
        if flows:
            cur = await conn.execute(sql_flows.RELEASE_COUNTED, [flows])
            row = await cur.fetchone()
            if row and row[0]:
                # Mostly a race with the worker whose settle counted them (it releases
                # them in the same round trip); after a worker died, a repair.
                log.debug("released %d flow node(s) whose parents had all succeeded", row[0])
                await conn.execute(sql_flows.REFRESH_FLOWS, [flows])
            await conn.execute(sql_flows.PRUNE_COUNTDOWNS)

    async def close(self) -> None:
        await self.connection.close()
        self.is_leader = False
