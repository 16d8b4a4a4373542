"""Sweeps the registrations of workers that stopped heartbeating, so the console lists
only live workers (a live worker whose row was swept registers again at its next beat)."""

from __future__ import annotations

import psycopg

from queue_engine import sql
from queue_engine.worker.services.service import Service

STALE_WORKER_AFTER = 60.0  # seconds without a heartbeat


async def sweep_stale_workers(conn: psycopg.AsyncConnection) -> None:
    await conn.execute(sql.SWEEP_STALE_WORKERS, [STALE_WORKER_AFTER])


class StaleWorkers(Service):
    name = "stale_workers"
    interval = 30.0

    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        await sweep_stale_workers(conn)
        return False
