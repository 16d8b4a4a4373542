"""The heartbeat: keeps this worker's registration and its jobs' leases alive, and stops
the handlers of jobs that are no longer its own."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import psycopg

from queue_engine import sql
from queue_engine.worker.outage import describe
from queue_engine.worker.reconnecting import ReconnectingConnection
from queue_engine.worker.roster import Roster
from queue_engine.worker.shared import Shared

log = logging.getLogger("queue_engine.worker")

# Beats come at most BEAT_MAX seconds apart; a worker silent for three of them is left
# out of the ring the wake-up hints go round (a worker killed outright goes unswept
# for a minute, and its share of the hints would wait for other workers' polls).
BEAT_MAX = 5.0
RING_FRESH = 3 * BEAT_MAX


class Heartbeat:
    def __init__(
        self,
        worker_id: str,
        shared: Shared,
        aux: ReconnectingConnection,
        *,
        registration: Callable[[], dict[str, Any]],
        is_leader: Callable[[], bool],
        roster: Roster,
    ) -> None:
        self.worker_id = worker_id
        self.shared = shared
        self.aux = aux
        self.registration = registration
        self.is_leader = is_leader
        self.roster = roster

    async def loop(self) -> None:
        last = 0.0
        shared = self.shared
        while True:
            interval = max(0.2, min(BEAT_MAX, shared.min_lock / 3))
            if shared.inflight or shared.busy.is_set():
                await asyncio.sleep(min(interval, 0.5))  # a new claim may shorten the interval
            else:  # idle: the next beat, unless a job starts first
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(shared.busy.wait(), timeout=interval)
            if time.monotonic() - last < interval:
                continue
            last = time.monotonic()
            # A beat that loses its connection goes again as soon as Postgres answers, not
            # a beat later: run() retries it.
            try:
                await self.aux.run(self.beat, what="heartbeat")
            except psycopg.Error as exc:
                log.warning("heartbeat: %s; trying again at the next beat", describe(exc))

    async def beat(self, conn: psycopg.AsyncConnection) -> None:
        inflight = self.shared.inflight
        executions = list(inflight.values())
        async with conn.transaction():
            beat = await conn.execute(
                sql.WORKER_HEARTBEAT,
                {"id": self.worker_id, "in_flight": len(executions), "is_leader": self.is_leader()},
            )
            if beat.rowcount == 0:
                # Swept as stale (say, while Postgres was out of reach longer than
                # STALE_WORKER_AFTER) or deleted by hand: this worker is alive, so it
                # registers again rather than vanishing from the console for good.
                await conn.execute(sql.REGISTER_WORKER, self.registration())
                log.info("worker %s: its registration was gone; registered again", self.worker_id)
            live = await conn.execute(sql.LIVE_WORKERS, {"fresh": RING_FRESH})
            self.roster.update(await live.fetchall())
            if not executions:
                return
            cur = await conn.execute(
                sql.HEARTBEAT,
                {
                    "ids": [e.job_id for e in executions],
                    "tokens": [e.token for e in executions],
                },
            )
            rows = await cur.fetchall()
            held = {row[0] for row in rows}
            # An operator's cancel whose NOTIFY this worker missed: it stops them now.
            asked = {row[0] for row in rows if row[1]}
        for execution in executions:
            if execution.job_id in asked and inflight.get(execution.job_id) is execution:
                execution.cancel("cancelled")
            if (
                execution.job_id not in held
                and not execution.completed_in_transaction  # ctx.atomic() moved the row
                and inflight.get(execution.job_id) is execution
            ):
                log.warning(
                    "job %s: lease lost (cancelled, rescued or removed); stopping it",
                    execution.job_id,
                )
                execution.cancel("lease lost")
