"""The leader: an election, and the services (worker/services/) the winner runs.

Leadership is a session advisory lock held on a dedicated connection: when the
holder dies, Postgres drops the lock and another worker takes over at its next
try (every ELECTION_INTERVAL seconds).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import psycopg

from queue_engine import sql
from queue_engine.conf import option
from queue_engine.worker.outage import retry_waits
from queue_engine.worker.reconnecting import ReconnectingConnection
from queue_engine.worker.services import Every, Service

log = logging.getLogger("queue_engine.worker")

ELECTION_INTERVAL = 1.0
TICK = 0.5  # seconds between the leader's passes: scheduled jobs start at most about this late


class Leader:
    def __init__(
        self, worker_id: str, connection: ReconnectingConnection, services: Sequence[Service]
    ) -> None:
        self.worker_id = worker_id
        self.connection = connection
        events = bool(option("SERVICE_EVENTS"))
        self.services = [Every(service, events=events) for service in services]
        self.is_leader = False

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
                        log.info("worker %s is now the leader", self.worker_id)
                if self.is_leader:
                    for service in self.services:
                        await service(conn)
                waits = retry_waits()  # this went through: the next failure retries at once
                await asyncio.sleep(TICK if self.is_leader else ELECTION_INTERVAL)
            except asyncio.CancelledError:
                raise
            except psycopg.Error as exc:
                # Closing the connection releases the lock: another worker may win it now,
                # or this one again as soon as Postgres answers.
                if self.is_leader:
                    log.debug("worker %s: leadership dropped", self.worker_id)
                self.is_leader = False
                await self.connection.lost(exc)
                await asyncio.sleep(next(waits))

    async def close(self) -> None:
        for service in self.services:
            await service.close()
        await self.connection.close()
        self.is_leader = False
