"""Runs a leader service at most once per interval, and again at once while it says
more work is waiting.

Connection errors go up to the leader (which reconnects); any other error is logged
and the service tries again after its interval, so that one broken service never stops
the others.

Events: with QUEUE_ENGINE["SERVICE_EVENTS"] on, each step that returns is followed by a
NOTIFY on the channel `queue_engine_service` whose payload is the service's name
(sql.SERVICE_RAN). A NOTIFY reaches any process listening on the database, so a test
that runs real `runworker` subprocesses waits for a service's step instead of sleeping
for longer than its interval (tests/support/services.py). The step's own transactions
have committed by then; a service that works in the background (rollup, vacuum) has
only started that work. Off by default: the runner then checks one attribute and sends
nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time

import psycopg

from queue_engine import sql
from queue_engine.worker.services.service import Service

log = logging.getLogger("queue_engine.worker")


class Every:
    def __init__(self, service: Service, *, events: bool = False) -> None:
        self.service = service
        self.events = events
        self.last = float("-inf")
        self.more = False

    async def __call__(self, conn: psycopg.AsyncConnection) -> None:
        now = time.monotonic()
        if not self.more and now - self.last < self.service.interval:
            return
        self.last = now
        try:
            self.more = await self.service.run(conn)
        except (asyncio.CancelledError, psycopg.OperationalError, psycopg.InterfaceError):
            raise
        except Exception:
            self.more = False
            log.exception(
                "leader service %s failed; retrying in %ss",
                self.service.name,
                self.service.interval,
            )
            return
        if self.events:
            await conn.execute(sql.SERVICE_RAN, [self.service.name])

    async def close(self) -> None:
        await self.service.close()
