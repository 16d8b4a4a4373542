"""The listener: LISTENs for wake-ups (new work in a queue) and control messages (an
operator's cancel, a resumed queue), and keeps listening across connection losses."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

import psycopg

from queue_engine import sql
from queue_engine.worker.outage import retry_waits
from queue_engine.worker.reconnecting import ReconnectingConnection
from queue_engine.worker.roster import Roster, Wake
from queue_engine.worker.shared import Shared

log = logging.getLogger("queue_engine.worker")


class Listener:
    def __init__(
        self,
        connection: ReconnectingConnection,
        queues: list[str],
        shared: Shared,
        *,
        roster: Roster,
        free: Callable[[], int],
        hand_on: Callable[[Wake], None],
    ) -> None:
        self.connection = connection
        self.wanted = set(queues)  # empty: every queue
        self.shared = shared
        self.roster = roster
        self.free = free  # slots no job holds or a claim on its way has promised
        self.hand_on = hand_on  # NOTIFY a hint meant for this worker to another

    async def loop(self) -> None:
        waits = retry_waits()
        while True:
            try:
                conn = await self.connection.get()
                for statement in sql.LISTEN_WORKER:
                    await conn.execute(statement)
                waits = retry_waits()  # listening: the next loss is retried at once
                self.shared.floors.forget()  # wake-ups may have been missed meanwhile
                self.shared.wake()  # catch up on what was missed while not listening
                async for note in conn.notifies():
                    if note.channel == "qe_wake":
                        self.on_wake(note.payload)
                    else:
                        self.on_control(note.payload)
            except asyncio.CancelledError:
                raise
            except psycopg.Error as exc:
                await self.connection.lost(exc)  # the lanes poll meanwhile
                await asyncio.sleep(next(waits))

    def on_wake(self, payload: str) -> None:
        """New work in a queue: claim if the hint is for this worker (roster.py)."""
        wake = Wake.parse(payload)
        if self.wanted and wake.queue not in self.wanted:
            return
        self.shared.floors.lower(wake.queue, wake.first)
        claim, other = self.roster.decide(wake, self.free())
        if claim:
            self.shared.wake()
        elif other is not None:
            self.hand_on(other)

    def on_control(self, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            return
        if message.get("action") == "cancel":
            for job_id in message.get("ids", []):
                execution = self.shared.inflight.get(job_id)
                if execution is not None:
                    log.info("job %s: cancelled by %s", job_id, message.get("by", "an operator"))
                    execution.cancel("cancelled")
        elif message.get("action") in ("resume", "wake"):
            self.shared.floors.forget()
            self.shared.wake()
