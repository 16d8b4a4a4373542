"""Quarantine of suspects, jobs rescued at least twice (sql.CLAIM): a suspect may be
what killed its workers, and any job claimed beside it shares its fate, so it runs
alone on a worker that has emptied for it.

One worker empties for a queue's suspects, not every worker that sees them: the one
that holds the queue's right, a session advisory lock (sql.TRY_SUSPECT_RIGHTS) on a
connection of its own. The others pass suspects over and keep claiming. The holder
claims nothing more until its running jobs have ended, then claims one suspect alone
and nothing else until it has ended, then the next suspect of that queue the same way
(it is empty already), and lets the right go when a claim alone finds none. If the
holder dies, or its connection does, Postgres lets the right go with the connection,
and the next worker to see the suspects takes it over.

The rights are taken and let go in tasks of their own: a claim lane never waits for
them (a connection Postgres refuses, at max_connections, would hold it up for good).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import psycopg

from queue_engine import sql
from queue_engine.worker.reconnecting import ReconnectingConnection

log = logging.getLogger("queue_engine.worker")

# Seconds a try for the rights, or their release, may take before the connection is
# closed (which lets any right go) and the worker goes on without them.
PATIENCE = 5.0


class Quarantine:
    def __init__(self, conninfo: str, retry_every: float, wake: Callable[[], None]) -> None:
        # Opened when suspects first show up, then kept; closed at the stop.
        self.connection = ReconnectingConnection(conninfo, "suspects")
        # A worker that lost the race tries again at most this often while its claims
        # report suspects: it claims normally meanwhile.
        self.retry_every = retry_every
        self.wake = wake  # the lanes: a right was taken
        self.next_try = 0.0
        self.rights: list[str] = []  # queues whose right this worker holds
        self.rights_pid: int | None = None  # the backend that holds them
        self.trying = False
        # A suspect claimed alone runs: nothing is claimed beside it, right or no right
        # (the right goes if the connection does).
        self.alone = False
        self._tasks: set[asyncio.Task[None]] = set()

    def claim(self, want: int, *, busy: bool, stopping: bool) -> tuple[int, list[str] | None]:
        """How many jobs to claim, and the queues to claim one suspect alone from (or
        None for a claim like any other)."""
        if self.alone:
            if busy:
                return 0, None
            self.alone = False
        if not self.rights or stopping:
            return want, None
        if busy:
            return 0, None  # the worker empties first, and a suspect runs alone
        return 1, self.rights

    def seen(self, queues: Iterable[str]) -> None:
        """A claim reported suspects due in `queues`: try to take their rights."""
        now = time.monotonic()
        if self.rights or self.trying or now < self.next_try:
            return
        self.next_try = now + self.retry_every
        self.trying = True
        self._spawn(self._take(sorted(set(queues))))

    def claimed_alone(self, rows: list[tuple[Any, ...]]) -> None:
        """After a claim alone: keep the right of the suspect's queue while it runs (and
        for the next one there), let the others go; with no suspect, let all go."""
        self.alone = bool(rows)
        keep = {str(row[2]) for row in rows}  # sql.CLAIM's rows: id, kind, queue, ...
        self._let_go([q for q in self.rights if q not in keep])
        self.rights = [q for q in self.rights if q in keep]

    def let_go(self) -> None:
        """The worker stops: another one runs the suspects."""
        self._let_go(self.rights)
        self.rights = []

    async def _take(self, queues: list[str]) -> None:
        async def take(conn: psycopg.AsyncConnection) -> list[str]:
            cur = await conn.execute(sql.TRY_SUSPECT_RIGHTS, [queues])
            return [row[0] for row in await cur.fetchall()]

        try:
            rights = await self._run(take, "take suspects' rights")
        finally:
            self.trying = False
        if rights:
            self.rights, self.rights_pid = rights, self.connection.pid
            log.info("suspects due in %s: this worker empties to run them alone", ",".join(rights))
            self.wake()

    def _let_go(self, queues: list[str]) -> None:
        if not queues or self.connection.conn is None or self.connection.pid != self.rights_pid:
            return  # a new connection holds no right: the old one's went with it

        async def let_go(conn: psycopg.AsyncConnection) -> None:
            await conn.execute(sql.LET_GO_SUSPECT_RIGHTS, [queues])

        self._spawn(self._run(let_go, "let suspects' rights go"))

    async def _run[T](
        self, action: Callable[[psycopg.AsyncConnection], Coroutine[Any, Any, T]], what: str
    ) -> T | None:
        """`action` on the connection; on failure or past PATIENCE, close it (letting
        every right go) and return None."""
        try:
            return await asyncio.wait_for(
                self.connection.run(action, what=what, attempts=1), PATIENCE
            )
        except (psycopg.Error, TimeoutError):
            self.rights = []
            await self.connection.close()
            return None

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(work, name="suspects' rights")
        self._tasks.add(task)  # referenced until done, or the loop may collect it
        task.add_done_callback(self._tasks.discard)
