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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import psycopg

from queue_engine import sql
from queue_engine.worker.store import Connection

log = logging.getLogger("queue_engine.worker")


class Quarantine:
    def __init__(self, conninfo: str, retry_every: float) -> None:
        # Opened when suspects first show up, closed (letting every right go) at the stop.
        self.connection = Connection(conninfo, "suspects")
        # A worker that lost the race tries again at most this often while its claims
        # report suspects: it claims normally meanwhile.
        self.retry_every = retry_every
        self.next_try = 0.0
        self.rights: list[str] = []  # queues whose right this worker holds
        self.rights_pid: int | None = None  # the backend that holds them

    def claim(self, want: int, *, busy: bool, stopping: bool) -> tuple[int, list[str] | None]:
        """How many jobs to claim, and the queues to claim one suspect alone from (or
        None for a claim like any other)."""
        if not self.rights or stopping:
            return want, None
        if busy:
            return 0, None  # the worker empties first, and a suspect runs alone
        return 1, self.rights

    async def seen(self, queues: Iterable[str]) -> None:
        """A claim reported suspects due in `queues`: try to take their rights."""
        now = time.monotonic()
        if self.rights or now < self.next_try:
            return
        self.next_try = now + self.retry_every
        wanted = sorted(set(queues))

        async def take(conn: psycopg.AsyncConnection) -> list[str]:
            cur = await conn.execute(sql.TRY_SUSPECT_RIGHTS, [wanted])
            return [row[0] for row in await cur.fetchall()]

        try:
            self.rights = await self.connection.run(take, what="take suspects' rights", attempts=1)
        except psycopg.Error:
            await self.connection.close()  # and any right with it: tried again later
            return
        self.rights_pid = self.connection.pid
        if self.rights:
            log.info(
                "suspects due in %s: this worker empties to run them alone",
                ",".join(self.rights),
            )

    async def claimed_alone(self, rows: list[tuple[object, ...]]) -> None:
        """After a claim alone: keep the right of the suspect's queue while it runs (and
        for the next one there), let the others go; with no suspect, let all go."""
        keep = {str(row[2]) for row in rows}  # sql.CLAIM's rows: id, kind, queue, ...
        await self._let_go([q for q in self.rights if q not in keep])
        self.rights = [q for q in self.rights if q in keep]

    async def _let_go(self, queues: list[str]) -> None:
        if not queues or self.connection.conn is None or self.connection.pid != self.rights_pid:
            return  # a new connection holds no right: the old one's went with it
        try:
            await self.connection.run(
                lambda conn: conn.execute(sql.LET_GO_SUSPECT_RIGHTS, [queues]),
                what="let suspects' rights go",
                attempts=1,
            )
        except psycopg.Error:
            await self.connection.close()  # which lets every right go
            self.rights = []

    async def let_go(self) -> None:
        """The worker stops: another one runs the suspects."""
        await self._let_go(self.rights)
        self.rights = []
