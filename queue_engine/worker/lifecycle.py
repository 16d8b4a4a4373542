"""One worker process: its parts on one asyncio loop, from start-up to a clean stop.

The parts: the claim lanes (lanes.py), the flusher of job output (flusher.py), the
heartbeat (heartbeat.py), the listener (listener.py), the leader election and its
services (leader.py), the idle watchdog and the count-down of big fan-outs (here).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from typing import Any

import psycopg

from queue_engine import sql
from queue_engine.worker import capture
from queue_engine.worker.flusher import Flusher, Output
from queue_engine.worker.heartbeat import Heartbeat
from queue_engine.worker.lanes import STOP_OVERDUE, STOP_PATIENCE, Lanes
from queue_engine.worker.leader import Leader
from queue_engine.worker.listener import Listener
from queue_engine.worker.options import WorkerOptions
from queue_engine.worker.reconnecting import ReconnectingConnection
from queue_engine.worker.roster import Roster, Wake
from queue_engine.worker.services import leader_services
from queue_engine.worker.services.flow_countdown import (
    count_down_more,
    releases_left,
    split_releases,
)
from queue_engine.worker.services.promoter import promote_due
from queue_engine.worker.shared import Shared
from queue_engine.worker.threads import HandlerThreads

log = logging.getLogger("queue_engine.worker")

__all__ = ["Worker", "WorkerOptions"]


class Worker:
    def __init__(self, options: WorkerOptions) -> None:
        self.options = options
        self.worker_id = options.worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.concurrency = max(1, options.concurrency)
        self.shared = Shared()
        self.output = Output()
        self.threads = HandlerThreads(self.concurrency)
        self.aux = ReconnectingConnection(options.conninfo, "heartbeat")
        self.lanes = Lanes(
            options, self.worker_id, self.shared, self.output, self.threads, promote=self._promote
        )
        self.flusher = Flusher(self.output, self.shared, self.aux)
        self.roster = Roster(self.worker_id)
        self.listener = Listener(
            ReconnectingConnection(options.conninfo, "listener"),
            options.queues,
            self.shared,
            roster=self.roster,
            free=self.lanes.free_slots,
            hand_on=self._hand_on,
        )
        self.leader = Leader(
            self.worker_id,
            ReconnectingConnection(options.conninfo, "leader"),
            leader_services(
                conninfo=options.conninfo,
                max_rescues=options.max_rescues,
                flow_chunk=self.lanes.flow_chunk,
            ),
        )
        self.heartbeat = Heartbeat(
            self.worker_id,
            self.shared,
            self.aux,
            registration=self._registration,
            is_leader=lambda: self.leader.is_leader,
            roster=self.roster,
        )
        # The rest of the fan-outs this worker's settles began to release: counted down
        # a chunk at a time on a connection of its own (opened when first needed) while
        # the lanes run the first children (_count_down_loop).
        self.releaser = ReconnectingConnection(options.conninfo, "releaser")
        self._signals = 0
        self._tasks: list[asyncio.Task[Any]] = []
        self._handing_on: set[asyncio.Task[Any]] = set()

    async def run(self) -> int:
        capture.install()
        loop = asyncio.get_running_loop()
        self.threads.bind(loop, self.lanes.finished_jobs)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal)
        await self._register()
        log.info(
            "worker %s started: queues=%s concurrency=%d labels=%s",
            self.worker_id,
            ",".join(self.options.queues) or "all",
            self.concurrency,
            ",".join(self.options.labels) or "-",
        )
        self._tasks = [
            asyncio.create_task(self.listener.loop(), name="listener"),
            asyncio.create_task(self.heartbeat.loop(), name="heartbeat"),
            asyncio.create_task(self.flusher.loop(), name="flush"),
            asyncio.create_task(self._watchdog_loop(), name="watchdog"),
            asyncio.create_task(self._count_down_loop(), name="count down"),
        ]
        if self.options.leader:
            self._tasks.append(asyncio.create_task(self.leader.run(), name="leader"))
        try:
            await self.lanes.run()
        finally:
            await self._stop()
        return 0

    def _on_signal(self) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("second signal: aborting now; running jobs come back after their lease")
            os._exit(1)
        log.info(
            "stopping: no more claims; waiting up to %ss for %d running job(s)",
            self.options.shutdown_timeout,
            len(self.shared.inflight),
        )
        self.lanes.stop()
        asyncio.get_running_loop().call_later(
            self.options.shutdown_timeout + STOP_OVERDUE, self._overdue
        )

    def _overdue(self) -> None:
        log.warning(
            "stopping took more than %.1fs past the shutdown timeout (Postgres out of "
            "reach?): exiting now; jobs not given back come back after their lease",
            STOP_OVERDUE,
        )
        logging.shutdown()
        os._exit(1)

    async def _stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            await asyncio.wait_for(self._goodbye(), STOP_PATIENCE)
        except TimeoutError:
            log.warning("Postgres did not answer while stopping: last log lines not written")
        for conn in (*self.lanes.connections(), self.aux, self.listener.connection, self.releaser):
            await conn.close()
        await self.leader.close()
        self.threads.shutdown()
        log.info("worker %s stopped (%d jobs claimed)", self.worker_id, self.lanes.claimed_total)

    async def _goodbye(self) -> None:
        await self.flusher.flush()
        with contextlib.suppress(psycopg.Error):
            await self.aux.run(
                lambda c: c.execute(sql.UNREGISTER_WORKER, [self.worker_id]),
                what="unregister",
                attempts=3,
            )

    async def _register(self) -> None:
        await self.aux.run(
            lambda c: c.execute(sql.REGISTER_WORKER, self._registration()), what="register"
        )

    def _registration(self) -> dict[str, Any]:
        return {
            "id": self.worker_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": self.options.queues,
            "labels": self.options.labels,
            "concurrency": self.concurrency,
        }

    def _hand_on(self, wake: Wake) -> None:
        """A hint for this worker while it has no free slot: to the worker it names."""

        async def send() -> None:
            with contextlib.suppress(psycopg.Error):  # lost: the polls find the job
                await self.aux.run(
                    lambda c: c.execute(sql.NOTIFY_WAKE, [wake.payload()]),
                    what="hand on a wake-up",
                    attempts=1,
                )

        task = asyncio.create_task(send())
        self._handing_on.add(task)  # referenced until done, or the loop may collect it
        task.add_done_callback(self._handing_on.discard)

    async def _promote(self) -> int:
        """Promote due scheduled jobs now (burst mode); any worker may do it."""
        return await self.aux.run(promote_due, what="promote")

    async def _count_down_loop(self) -> None:
        shared = self.shared

        def released(count: int) -> None:
            if count:  # this worker's lanes first; the chunk's NOTIFY wakes the others
                shared.wake()

        chunk = self.lanes.flow_chunk
        while True:
            await shared.counting_down.wait()
            shared.counting = True
            try:
                # Until no row is left: split what settles wrote into ranges the claims
                # take side by side, and release what they leave (sql.RELEASE_GRACE).
                while True:
                    shared.counting_down.clear()
                    await self.releaser.run(
                        lambda conn: split_releases(conn, chunk), what="split flow releases"
                    )
                    await self.releaser.run(
                        lambda conn: count_down_more(conn, chunk, released),
                        what="count down flow children",
                    )
                    if not await self.releaser.run(releases_left, what="look for releases"):
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(
                            shared.counting_down.wait(), timeout=sql.RELEASE_GRACE / 2
                        )
            except psycopg.Error:
                log.exception("counting down flow children failed; the leader takes it over")
            finally:
                shared.counting = False
                shared.wake()

    async def _watchdog_loop(self) -> None:
        """Cancel handlers past their kind's idle timeout (no heartbeat, no progress)."""
        while True:
            await self.flusher.idle()
            await asyncio.sleep(0.25)
            now = time.monotonic()
            for execution in list(self.shared.inflight.values()):
                definition = execution.definition
                timeout = definition.idle_timeout if definition else None
                if (
                    timeout
                    and now - execution.touched_at > timeout
                    and execution.cancel("idle timeout")
                ):
                    if execution.is_async:
                        log.warning(
                            "job %s: idle for more than %ss; cancelling", execution.job_id, timeout
                        )
                    elif self.threads.abandon(execution, timeout):
                        self.lanes.finished_jobs([execution.cancelled_outcome()])
