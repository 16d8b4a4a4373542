"""Promotes scheduled jobs whose time has come, and parked jobs whose wait's deadline has:
they become available to claim."""

from __future__ import annotations

import psycopg

from queue_engine import sql
from queue_engine.worker.services.service import Service

BATCH = 1000


async def promote_due(conn: psycopg.AsyncConnection) -> int:
    """Promote every due scheduled job, a batch per statement; returns how many.

    The leader runs it every tick; a worker in burst mode runs it too before it stops,
    so a job that fell due meanwhile is not left behind."""
    total = 0
    for statement in (sql.PROMOTE_SCHEDULED, sql.PROMOTE_PARKED):
        while True:
            cur = await conn.execute(statement, {"limit": BATCH})
            total += cur.rowcount
            if cur.rowcount < BATCH:
                break
    return total


class Promoter(Service):
    name = "promoter"
    interval = 0.0  # every leader tick: scheduled jobs start at most a tick late

    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        await promote_due(conn)
        return False  # promote_due goes on until nothing due is left
