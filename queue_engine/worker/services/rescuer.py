"""Rescues jobs whose lease expired (their worker died or lost Postgres): back to their
queue, or to the dead letter when rescued too often, or cancelled as an operator asked."""

from __future__ import annotations

import logging

import psycopg

from queue_engine import sql
from queue_engine.worker.services.service import Service

log = logging.getLogger("queue_engine.worker")

BATCH = 1000
ENDS = {
    "revived": "back to available",
    "dead": "dead-lettered (rescued too often or out of attempts)",
    "cancelled": "cancelled, as an operator had asked",
}


async def rescue_expired(conn: psycopg.AsyncConnection, *, max_rescues: int) -> None:
    flows: list[int] = []
    async with conn.transaction():
        cur = await conn.execute(sql.RESCUE_EXPIRED, {"limit": BATCH, "max_rescues": max_rescues})
        rows = await cur.fetchall()
        revived = sorted({queue for what, _, queue in rows if what == "revived"})
        if revived:
            await conn.execute(sql.NOTIFY_QUEUES, [revived])
        dead = [job_id for what, job_id, _ in rows if what in ("dead", "cancelled")]
        if dead:
            cur = await conn.execute(sql.FLOWS_OF_RECORDS, [dead])
            flows = [row[0] for row in await cur.fetchall()]
            if flows:
                await conn.execute(sql.MARK_UPSTREAM_FAILED, {"ids": dead})
                await conn.execute(sql.REFRESH_FLOWS, [flows])
    if flows:  # again after the commit: see the worker's settle
        await conn.execute(sql.REFRESH_FLOWS, [flows])
    for what, job_id, _ in rows:
        log.warning("job %s: lease expired; %s", job_id, ENDS[what])


class Rescuer(Service):
    name = "rescuer"
    interval = 1.0

    def __init__(self, *, max_rescues: int) -> None:
        self.max_rescues = max_rescues

    async def run(self, conn: psycopg.AsyncConnection) -> bool:
        await rescue_expired(conn, max_rescues=self.max_rescues)
        return False
