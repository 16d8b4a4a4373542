"""The worker's own connections to Postgres (`ReconnectingConnection`): connect with
patience, retry what is safe to retry. (The Django connections of the handler threads are
`handler_connections`; connection strings, `queue_engine.connections`.)"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import psycopg
from psycopg import errors

from queue_engine import sql
from queue_engine.worker.outage import OUTAGE, describe, retry_waits

log = logging.getLogger("queue_engine.worker")
T = TypeVar("T")


class ReconnectingConnection:
    """One psycopg connection that reconnects when it breaks."""

    def __init__(self, conninfo: str, purpose: str, settings: Sequence[str] = ()) -> None:
        self.conninfo = conninfo
        self.purpose = purpose
        self.settings = settings  # SET statements run on every new connection
        self.conn: psycopg.AsyncConnection | None = None
        self.pid: int | None = None
        self.opened_at: float | None = None  # time.monotonic() of the last connect
        # One caller at a time: coroutines that share this connection (heartbeat, log
        # flush, burst promotion; a lane and a shutdown release) must not interleave
        # their transaction blocks (psycopg raises OutOfOrderTransactionNesting), nor
        # both open a connection when it is down.
        self._lock = asyncio.Lock()

    async def get(self) -> psycopg.AsyncConnection:
        if self.conn is not None and not self.conn.closed and not self.conn.broken:
            return self.conn
        waits = retry_waits()
        while True:
            try:
                self.conn = await psycopg.AsyncConnection.connect(
                    self.conninfo,
                    autocommit=True,
                    application_name=f"queue_engine {self.purpose}",
                )
                self.pid = self.conn.info.backend_pid
                for setting in (*sql.WORKER_SESSION, *self.settings):
                    await self.conn.execute(setting)
            except psycopg.OperationalError as exc:
                OUTAGE.lost(self.purpose, exc, self.opened_at)
                await self.close()
                await asyncio.sleep(next(waits))
            else:
                self.opened_at = time.monotonic()
                OUTAGE.back(self.purpose)
                return self.conn

    async def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):  # closing a broken connection may fail
                await self.conn.close()
            self.conn = None

    async def lost(self, exc: psycopg.Error) -> None:
        """Close the connection after `exc`; get() opens another."""
        if self.conn is None or self.conn.broken or self.conn.closed:
            OUTAGE.lost(self.purpose, exc, self.opened_at)
        else:  # a statement failed (a timeout, say), not the connection
            log.warning("%s: %s; reconnecting", self.purpose, describe(exc))
        await self.close()

    async def run(
        self,
        action: Callable[[psycopg.AsyncConnection], Awaitable[T]],
        *,
        what: str,
        attempts: int = 0,
    ) -> T:
        """Run `action`, reconnecting on connection loss and retrying deadlocks.

        `attempts=0` retries until it succeeds; only pass idempotent actions.
        """
        tried = 0
        waits = retry_waits()
        while True:
            tried += 1
            async with self._lock:
                conn = await self.get()
                try:
                    return await action(conn)
                except (errors.DeadlockDetected, errors.SerializationFailure) as exc:
                    log.info("%s: %s; retrying", what, exc.sqlstate)
                    failure: Exception = exc
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    await self.lost(exc)
                    failure = exc
            if attempts and tried >= attempts:
                raise failure
            await asyncio.sleep(next(waits))
