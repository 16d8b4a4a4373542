"""One worker process: claim, run, settle, heartbeat, listen; one asyncio loop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import random
import signal
import socket
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import psycopg

from queue_engine import sql, sql_flows
from queue_engine.payloads import storable
from queue_engine.worker import capture
from queue_engine.worker.execution import Execution, Outcome, error_json
from queue_engine.worker.leader import Leader, count_down_more
from queue_engine.worker.outage import describe, retry_waits
from queue_engine.worker.script import Prepared, Script
from queue_engine.worker.store import Connection

log = logging.getLogger("queue_engine.worker")

MAX_EVENT_IDS = 200  # ids per console hint; NOTIFY payloads stay far below 8000 bytes
LANES = 2
# A claim that took fewer jobs than it wanted and left some of its candidates behind
# (a cap, a busy key's room, the rate limit: sql.CLAIM's `held`) is followed by another
# this soon, not at the next poll; the wait doubles while such claims come back empty,
# up to the poll interval.
HELD_BACK_FIRST = 0.01
# At the shutdown timeout, handlers are told to stop and get this long to heed it
# (ctx.sleep() returns, async handlers are cancelled) before their jobs are given back.
SHUTDOWN_GRACE = 0.5
# A job given back while its plain function still runs is claimable again only this
# much later: the process exits right after the release, and its threads with it.
RELEASE_FENCE = 1.0
# How long a stopping worker waits for Postgres to give jobs back, settle and say
# goodbye; out of reach longer, it leaves that to the leases. And a backstop: a stop
# that overruns the shutdown timeout by STOP_OVERDUE ends the process there.
STOP_PATIENCE = 1.0
STOP_OVERDUE = SHUTDOWN_GRACE + 3 * STOP_PATIENCE

# The claim lanes' sessions. Their statements are prepared once per connection (see
# worker/script.py) and each is planned once too, not for every call: under the default
# plan_cache_mode Postgres plans a prepared statement anew whenever its generic plan
# looks dearer than the custom ones, as REFRESH_FLOWS's always did (1.2 ms of planning
# for 0.1 ms of work, twice in every settle of a flow node), and the claim's custom
# plans cost more to make (about 1.4 ms for a small claim) than they save. All of them
# look rows up by key, so no sequential scan where an index serves: a plan made while a
# table was still empty would otherwise read the whole table for the life of the
# connection (a claim planned before the first flow read every queue_engine_flowedge
# row for every flow node it claimed). The claim adds sql.CLAIM_SETTINGS.
LANE_SETTINGS = (
    "SET plan_cache_mode = force_generic_plan",
    "SET enable_seqscan = off",
)

# The hot statements, prepared once per connection (see worker/script.py).
CLAIM = Prepared("qe_claim", sql.CLAIM)
PROGRESS = Prepared("qe_progress", sql.PROGRESS)
SETTLE_SUCCEEDED = Prepared("qe_settle_succeeded", sql.SETTLE_SUCCEEDED)
SETTLE_SUCCEEDED_FLOW = Prepared("qe_settle_succeeded_flow", sql_flows.SETTLE_SUCCEEDED_FLOW)
SETTLE_FAILED = Prepared("qe_settle_failed", sql.SETTLE_FAILED)
SETTLE_CANCELLED = Prepared("qe_settle_cancelled", sql.SETTLE_CANCELLED)
SETTLE_RETRY = Prepared("qe_settle_retry", sql.SETTLE_RETRY)
SETTLE_SNOOZED = Prepared("qe_settle_snoozed", sql.SETTLE_SNOOZED)
RELEASE = Prepared("qe_release", sql.RELEASE)
RECORD_RESULT = Prepared("qe_record_result", sql.RECORD_RESULT)
RECORD_RESULT_FLOW = Prepared("qe_record_result_flow", sql_flows.RECORD_RESULT_FLOW)
REFRESH_FLOWS = Prepared("qe_refresh_flows", sql_flows.REFRESH_FLOWS)
RELEASE_COUNTED = Prepared("qe_release_counted", sql_flows.RELEASE_COUNTED)
WAKE_LEFT = Prepared("qe_wake_left", sql.WAKE_LEFT)


@dataclass
class WorkerOptions:
    conninfo: str
    queues: list[str] = field(default_factory=list)  # empty: every queue
    concurrency: int = 10
    labels: list[str] = field(default_factory=list)
    worker_id: str = ""
    burst: bool = False
    poll_interval: float = 1.0
    shutdown_timeout: float = 30.0
    max_rescues: int = 5
    leader: bool = True  # take part in the leader election
    flow_release_chunk: int = 1000  # FLOW_RELEASE_CHUNK


class Worker:
    def __init__(self, options: WorkerOptions) -> None:
        self.options = options
        self.worker_id = options.worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.concurrency = max(1, options.concurrency)
        self.threads = ThreadPoolExecutor(
            max_workers=self.concurrency * 2, thread_name_prefix="job"
        )
        self.inflight: dict[int, Execution] = {}
        # Executions whose plain function runs in a thread now, in flight or abandoned
        # (an idle timeout); changed by the threads themselves.
        self.handler_threads: set[Execution] = set()
        self._abandoned_in_pool = 0
        self.outcomes: list[Outcome] = []
        self.logs: list[tuple[Any, ...]] = []
        self.progress: dict[int, tuple[int, float, str]] = {}
        self.progress_flushing: dict[int, tuple[int, float, str]] = {}  # being written now
        # Console hints (NOTIFY payloads) for settles that have committed. The flusher
        # sends them, in a transaction of their own: a NOTIFY holds Postgres's global
        # notify lock from its transaction's pre-commit until the commit is flushed, so a
        # NOTIFY inside every settle made all settles commit one at a time, each waiting
        # for the previous one's WAL flush (a third of a plain drain's throughput).
        self.hints: list[str] = []
        self.wakeup = asyncio.Event()
        # Set while jobs run: the log flusher and the idle watchdog sleep on it when the
        # worker is idle, so an idle worker wakes a few times a second, not 24.
        self.busy = asyncio.Event()
        self.maybe_more = True
        self.held_back_delay: float | None = None
        self._held_back_timer: asyncio.TimerHandle | None = None
        self.stopping = False
        self.finished = False
        self.deadline: float | None = None
        self.reserved = 0  # slots promised to claims in flight
        # While its claims meet queues with limits (sql.CLAIM's `limited` markers), a
        # worker sends one claim at a time: its lanes would only wait for each other at
        # the queue's lock, each with a smaller share of the room (in drain_with_limits,
        # this alone: 13,700 and 14,900 jobs/s against 12,600 and 13,400), and the lane
        # that lost the race could leave the job at the head of the queue to wait behind
        # the next one. The other lane settles meanwhile. Until the first claim says
        # otherwise, claims take turns.
        self.serial_claims = True
        # Quarantine of suspects, jobs rescued at least twice (sql.CLAIM): a suspect may
        # be what killed its workers, and any job claimed beside it shares its fate.
        # When a claim reports one due (`suspects`), the worker claims nothing more
        # until its jobs have ended, then claims one suspect alone, and nothing else
        # until it has ended (Worker._quarantine).
        self.suspects_waiting = False
        self.quarantined = False
        self.claiming = 0  # claims on their way
        self.freed_meanwhile = 0  # settles sent while a claim was on its way
        self.lane_share = self.concurrency
        self._extra_lanes: list[Connection] = []
        self.min_lock = 60.0
        self.claimer = Connection(options.conninfo, "claimer", LANE_SETTINGS)
        self.aux = Connection(options.conninfo, "heartbeat")
        self.listener = Connection(options.conninfo, "listener")
        self.leader = Leader(self, Connection(options.conninfo, "leader"))
        # The rest of the fan-outs this worker's settles began to release: counted down
        # a chunk at a time on a connection of its own (opened when first needed) while
        # the lanes run the first children (_count_down_loop).
        self.flow_chunk = max(1, options.flow_release_chunk)
        self.counting_down = asyncio.Event()
        self.counting = False
        self.releaser = Connection(options.conninfo, "releaser")
        self._signals = 0
        self._tasks: list[asyncio.Task[Any]] = []
        self.claimed_total = 0

    # --- lifecycle -----------------------------------------------------------

    async def run(self) -> int:
        capture.install()
        loop = asyncio.get_running_loop()
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
            asyncio.create_task(self._listen_loop(), name="listener"),
            asyncio.create_task(self._heartbeat_loop(), name="heartbeat"),
            asyncio.create_task(self._flush_loop(), name="flush"),
            asyncio.create_task(self._watchdog_loop(), name="watchdog"),
            asyncio.create_task(self._count_down_loop(), name="count down"),
        ]
        if self.options.leader:
            self._tasks.append(asyncio.create_task(self.leader.run(), name="leader"))
        try:
            await self._claim_loop()
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
            len(self.inflight),
        )
        self.stopping = True
        self.wakeup.set()
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
        for conn in (self.claimer, *self._extra_lanes, self.aux, self.listener, self.releaser):
            await conn.close()
        await self.leader.close()
        self.threads.shutdown(wait=False, cancel_futures=True)
        log.info("worker %s stopped (%d jobs claimed)", self.worker_id, self.claimed_total)

    async def _goodbye(self) -> None:
        await self._flush()
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

    # --- the hot loop -----------------------------------------------------------

    async def _claim_loop(self) -> None:
        """Run the claim lanes until the worker stops (or, in burst mode, runs dry).

        Two lanes on two connections let one lane's round trip to Postgres overlap
        the other lane's Python work; they share the slots and the finished jobs.
        """
        lanes = [self.claimer] + [
            Connection(self.options.conninfo, f"claimer-{i}", LANE_SETTINGS)
            for i in range(1, min(LANES, self.concurrency))
        ]
        self._extra_lanes = lanes[1:]
        self.lane_share = -(-self.concurrency // len(lanes))
        await asyncio.gather(*(self._lane(conn) for conn in lanes))

    async def _lane(self, conn: Connection) -> None:
        while not self.finished:
            if self.stopping:
                if self.deadline is None:
                    self.deadline = time.monotonic() + self.options.shutdown_timeout
                if not self.inflight and not self.outcomes and not self.reserved:
                    self._finish()
                    return
                if time.monotonic() >= self.deadline and not self.reserved:
                    await self._give_back(conn)
                    self._finish()
                    return
            free = min(self.concurrency - len(self.inflight) - self.reserved, self.lane_share)
            # A settle claims too, in the same round trip, even after a claim came up
            # short: the jobs it ends free room under their queue's cap and group caps,
            # so the jobs a cap held back start now rather than at the next poll.
            want = (
                free
                if (free > 0 and not self.stopping and (self.maybe_more or self.outcomes))
                else 0
            )
            want, alone = self._quarantine(want)
            if not self.outcomes and want == 0:
                if (
                    self.options.burst
                    and not self.inflight
                    and not self.maybe_more
                    and not self.reserved
                ):
                    promoted = await self.leader.promote_due()
                    if not promoted and not (
                        self.inflight or self.reserved or self.outcomes or self.counting
                    ):
                        self._finish()  # re-checked: the other lane may have claimed meanwhile
                        return
                    self.maybe_more = True
                    continue
                # One lane polls; the others wake on a hint, a finished job, or rarely.
                poll = self.options.poll_interval * (1 if conn is self.claimer else 5)
                await self._wait(self.deadline, poll)
                continue
            settle_only = bool(want and self.claiming and self.serial_claims)
            if settle_only:
                want = 0  # the other lane's claim is on its way: this one only settles
                if not self.outcomes:
                    await self._wait(self.deadline, self.options.poll_interval)
                    continue
            outcomes, self.outcomes = self.outcomes, []
            freed = self.freed_meanwhile
            if want:
                self.claiming += 1
            self.reserved += want
            try:
                rows, token = await self._settle_and_claim(conn, outcomes, want, alone)
            finally:
                self.reserved -= want
                if want:
                    self.claiming -= 1
                    if self.serial_claims:
                        self.wakeup.set()  # the other lane may claim now
            markers = {row[1] for row in rows if row[0] is None}  # sql.CLAIM's markers
            if markers:
                rows = [row for row in rows if row[0] is not None]
            if settle_only:
                # The room this settle freed may have come too late for the claim on its
                # way: the next claim looks again at once.
                self.freed_meanwhile += 1
                self.maybe_more = True
            if want:
                self.maybe_more = len(rows) >= want or self.freed_meanwhile != freed
                self.serial_claims = "limited" in markers
                self._held_back("held" in markers, bool(rows))
                if alone:
                    self.suspects_waiting = False
                    self.quarantined = bool(rows)
                elif "suspects" in markers:
                    self.suspects_waiting = True
            if any(
                o.execution.flow_id is not None
                or (o.kind in ("retry", "snoozed", "released") and o.delay <= 0)
                for o in outcomes
            ):
                self.maybe_more = True  # this settle may have made jobs runnable
            for row in rows:
                self._start(row, token)
            if rows:
                await asyncio.sleep(0)  # let quick handlers finish: their settle joins this batch

    def _quarantine(self, want: int) -> tuple[int, bool]:
        """How many jobs to claim, and whether alone: see `suspects_waiting`."""
        busy = bool(self.inflight or self.reserved or self.claiming)
        if self.quarantined:
            if busy:
                return 0, False
            self.quarantined = False
        elif self.suspects_waiting:
            if busy:
                return 0, False  # the worker empties first
            if not self.stopping:
                return 1, True
        return want, False

    def _held_back(self, held: bool, claimed: bool) -> None:
        """After a claim: if it left work it could not take, claim again soon."""
        if self._held_back_timer is not None:
            self._held_back_timer.cancel()
            self._held_back_timer = None
        if not held:
            self.held_back_delay = None
            return
        if claimed or self.held_back_delay is None:
            self.held_back_delay = HELD_BACK_FIRST
        else:
            self.held_back_delay = min(self.held_back_delay * 2, self.options.poll_interval)
        self._held_back_timer = asyncio.get_running_loop().call_later(
            self.held_back_delay, self._claim_again
        )

    def _claim_again(self) -> None:
        self._held_back_timer = None
        self.maybe_more = True
        self.wakeup.set()

    def _finish(self) -> None:
        self.finished = True
        self.wakeup.set()

    async def _wait(self, deadline: float | None, poll: float) -> None:
        timeout = poll
        if deadline is not None:
            timeout = max(0.0, min(timeout, deadline - time.monotonic()))
        try:
            await asyncio.wait_for(self.wakeup.wait(), timeout=timeout)
        except TimeoutError:
            self.maybe_more = True  # poll: notifications may have been lost
        self.wakeup.clear()

    def _start(self, row: tuple[Any, ...], token: int) -> None:
        execution = Execution(self, row, token)
        self.min_lock = min(self.min_lock, float(row[-1]))
        self.inflight[execution.job_id] = execution
        self.busy.set()
        self.claimed_total += 1
        # Started eagerly: the task runs at once, up to its first real suspension, instead
        # of a loop turn later. A handler that never waits (a quick async def) finishes
        # here, and its task is never scheduled at all.
        execution.task = asyncio.eager_task_factory(
            asyncio.get_running_loop(), self._execute(execution)
        )

    async def _execute(self, execution: Execution) -> None:
        try:
            outcome = await execution.run()
        except asyncio.CancelledError:
            outcome = Outcome("released", execution)
        except Exception as exc:  # a bug of ours: never lose the job
            log.exception("job %s: internal error", execution.job_id)
            outcome = execution._failure(exc, retryable=True)
        self.inflight.pop(execution.job_id, None)
        self.outcomes.append(outcome)
        self.wakeup.set()

    async def _settle_and_claim(
        self, lane: Connection, outcomes: list[Outcome], want: int, alone: bool = False
    ) -> tuple[list[tuple[Any, ...]], int]:
        """Settle finished jobs and claim the next batch in one transaction, one round trip."""
        token = random.getrandbits(62)
        batch = SettleBatch.of(outcomes)
        batch.chunk = self.flow_chunk
        # Progress not flushed yet goes in with the settle, before the row moves:
        # a job's last report must not be lost to the race with its completion.
        for outcome in outcomes:
            job_id = outcome.execution.job_id
            pending = self.progress.pop(job_id, None) or self.progress_flushing.get(job_id)
            if pending is not None:
                batch.progress[job_id] = pending
        claim = {
            "all_queues": not self.options.queues,
            "queues": self.options.queues,
            "labels": self.options.labels,
            "limit": want,
            "alone": alone,
            "worker": self.worker_id,
            "token": token,
        }

        tries = 0
        wake_queues, wake_released = batch.runnable_now()
        sent: list[Script] = []  # the message that went through (the last try's)

        async def action(conn: psycopg.AsyncConnection) -> list[tuple[Any, ...]]:
            nonlocal tries
            tries += 1
            if tries > 1 and want:
                # The last try may have committed before its connection broke.
                cur = await conn.execute(sql.RECOVER_CLAIM, claim)
                recovered = await cur.fetchall()
                if recovered:
                    return recovered
            script = Script()
            # The settle commits first, the claim after it in a transaction of its own:
            # both in one message, so one round trip still. A settle frees room under
            # its queue's cap and its jobs' group caps, and counts down the children of
            # flow nodes (a fan-in's join: one row every settling lane needs). Committed
            # before the claim, it frees that room and that row for every claimer now,
            # not after this claim has waited its turn for the queue's lock.
            batch.settle_in(script)
            place = None
            if want or wake_queues or wake_released:
                script.raw("BEGIN")
                if want:
                    for setting in sql.CLAIM_SETTINGS:
                        script.raw(setting)
                    place = script.add(CLAIM, claim, rows=True)
                if wake_queues or wake_released:
                    # After the claim: the others are woken only for what it left.
                    script.add(WAKE_LEFT, {"queues": wake_queues})
                    if wake_released:
                        script.raw(sql.CLEAR_RELEASED)
                script.raw("COMMIT")
            await script.run(conn)
            sent.append(script)
            return script.rows(place) if place is not None else []

        try:
            rows = await lane.run(action, what="settle and claim")
        except (psycopg.Error, UnicodeError) as exc:
            if not (batch and refused(exc)):
                log.exception("settle and claim failed; the jobs will be rescued after their lease")
                return [], token
            log.warning(
                "Postgres refused a settle of %d job(s) (%s); settling them one by one",
                len(outcomes),
                why_refused(exc),
            )
            await self._settle_one_by_one(lane, outcomes, batch.progress)
            self.maybe_more = True  # the claim did not run
            return [], token
        if sent:
            batch.report(log, sent[-1])
            if batch.left_children(sent[-1]):
                self.counting_down.set()  # the rest of a big fan-out: _count_down_loop
        hints = batch.hints()
        if hints:
            self.hints.extend(hints)
            self.busy.set()  # the flusher sends them
        return rows, token

    async def _settle_one_by_one(
        self,
        lane: Connection,
        outcomes: list[Outcome],
        progress: dict[int, tuple[int, float, str]],
    ) -> None:
        """Settle each outcome alone, so that only one Postgres refuses is affected: that
        job is dead-lettered with an engine error naming what was refused."""
        for outcome in outcomes:
            job_id = outcome.execution.job_id
            report = progress.get(job_id)
            try:
                await self._settle_alone(lane, outcome, report)
                continue
            except (psycopg.Error, UnicodeError) as exc:
                if not refused(exc):
                    log.exception("job %s: settle failed; it comes back after its lease", job_id)
                    continue
                reason = why_refused(exc)
            log.error(
                "job %s: Postgres refused its outcome (%s); dead-lettering it", job_id, reason
            )
            execution = outcome.execution
            failure = Outcome(
                "failed",
                execution,
                error=error_json(
                    execution.attempt,
                    "queue_engine.OutcomeRefused",
                    f"Postgres refused to store this job's outcome ({outcome.kind}): {reason}. "
                    "The job is dead-lettered with this error instead; its handler's "
                    "logs show what it did.",
                    "",
                    self.worker_id,
                ),
            )
            try:
                await self._settle_alone(lane, failure, None)
            except (psycopg.Error, UnicodeError):
                log.exception("job %s: settle failed; it comes back after its lease", job_id)

    async def _settle_alone(
        self, lane: Connection, outcome: Outcome, report: tuple[int, float, str] | None
    ) -> None:
        batch = SettleBatch.of([outcome])
        batch.chunk = self.flow_chunk
        if report is not None:
            batch.progress[outcome.execution.job_id] = report
        if not batch:
            return
        queues, _ = batch.runnable_now()
        sent: list[Script] = []

        async def action(conn: psycopg.AsyncConnection) -> None:
            script = Script()
            batch.settle_in(script)
            await script.run(conn)
            sent.append(script)

        # Once: a settle that committed before its connection broke must not be sent
        # again as if it had not (the next settle's fence would refuse it anyway).
        await lane.run(action, what="settle", attempts=1)
        if queues:
            with contextlib.suppress(psycopg.Error):
                await lane.run(
                    lambda c: c.execute(sql.NOTIFY_QUEUES, [queues]), what="wake", attempts=1
                )
        if sent and batch.left_children(sent[-1]):
            self.counting_down.set()
        self.hints.extend(batch.hints())
        self.busy.set()

    async def _count_down_loop(self) -> None:
        def released(count: int) -> None:
            if count:  # this worker's lanes first; the chunk's NOTIFY wakes the others
                self.maybe_more = True
                self.wakeup.set()

        while True:
            await self.counting_down.wait()
            self.counting_down.clear()
            self.counting = True
            try:
                await self.releaser.run(
                    lambda conn: count_down_more(conn, self.flow_chunk, released),
                    what="count down flow children",
                )
            except psycopg.Error:
                log.exception("counting down flow children failed; the leader takes it over")
            finally:
                self.counting = False
                self.maybe_more = True
                self.wakeup.set()

    async def _give_back(self, lane: Connection) -> None:
        """At the shutdown timeout: tell the running handlers to stop, settle what ends
        within SHUTDOWN_GRACE, and give the rest back to their queues."""
        self.finished = True  # the other lane must not give back too
        for execution in list(self.inflight.values()):
            execution.cancel("shutdown")
        grace = time.monotonic() + SHUTDOWN_GRACE
        while self.inflight and time.monotonic() < grace:
            await self._wait(grace, SHUTDOWN_GRACE)
        outcomes, self.outcomes = self.outcomes, []
        running = list(self.inflight.values())
        self.inflight.clear()
        try:
            await asyncio.wait_for(self._hand_over(lane, outcomes, running), STOP_PATIENCE)
        except TimeoutError:
            log.warning(
                "Postgres did not answer while giving jobs back: %d job(s) come back after "
                "their lease",
                len(outcomes) + len(running),
            )
        for execution in running:
            if execution.task is not None:
                execution.task.cancel()

    async def _hand_over(
        self, lane: Connection, outcomes: list[Outcome], running: list[Execution]
    ) -> None:
        if outcomes:
            await self._settle_and_claim(lane, outcomes, 0)
        if not running:
            return
        threads = [e for e in running if e in self.handler_threads]
        log.warning(
            "shutdown timeout: giving back %d running job(s)%s",
            len(running),
            f"; {len(threads)} plain function(s) still run and end with this process"
            if threads
            else "",
        )
        for statement, items, extra in (
            (sql.RELEASE, [e for e in running if e not in threads], {}),
            (sql.RELEASE_RUNNING, threads, {"after": RELEASE_FENCE}),
        ):
            if items:
                await self._release(lane, statement, items, extra)

    async def _release(
        self,
        lane: Connection,
        statement: str,
        executions: list[Execution],
        extra: dict[str, Any],
    ) -> None:
        params = {
            "ids": [e.job_id for e in executions],
            "tokens": [e.token for e in executions],
            **extra,
        }

        async def action(conn: psycopg.AsyncConnection) -> None:
            async with conn.transaction():
                cur = await conn.execute(statement, params)
                queues = sorted({q for _, q in await cur.fetchall()})
                await conn.execute(sql.NOTIFY_QUEUES, [queues])

        with contextlib.suppress(psycopg.Error):  # logged by run(); the leases bring them back
            await lane.run(action, what="release", attempts=5)

    def thread_returned(self, execution: Execution) -> None:
        """Called by the thread of an abandoned plain function when it returns at last."""
        log.info(
            "job %s: its abandoned handler returned; what it did is dropped "
            "(%d abandoned handler thread(s) left in this process)",
            execution.job_id,
            self.abandoned_threads(),
        )

    def abandoned_threads(self) -> int:
        return sum(1 for e in list(self.handler_threads) if e.cancel_reason == "idle timeout")

    def _abandon(self, execution: Execution, timeout: float) -> None:
        """A plain function past its idle timeout: its job settles now without it."""
        log.warning(
            "job %s: idle for more than %ss; abandoning its handler thread "
            "(%d abandoned handler thread(s) in this process)",
            execution.job_id,
            timeout,
            self.abandoned_threads(),
        )
        # Abandoned threads keep their place in the pool; once they fill its headroom
        # over the slots, new jobs get a new pool rather than wait for a free thread.
        self._abandoned_in_pool += 1
        if self._abandoned_in_pool >= self.concurrency:
            self.threads.shutdown(wait=False)
            self.threads = ThreadPoolExecutor(
                max_workers=self.concurrency * 2, thread_name_prefix="job"
            )
            self._abandoned_in_pool = 0

    # --- side loops ---------------------------------------------------------------

    async def _listen_loop(self) -> None:
        wanted = set(self.options.queues)
        waits = retry_waits()
        while True:
            try:
                conn = await self.listener.get()
                await conn.execute("LISTEN qe_wake")
                await conn.execute("LISTEN qe_control")
                waits = retry_waits()  # listening: the next loss is retried at once
                self.maybe_more = True
                self.wakeup.set()  # catch up on what we missed while not listening
                async for note in conn.notifies():
                    if note.channel == "qe_wake":
                        if not wanted or note.payload in wanted:
                            self.maybe_more = True
                            self.wakeup.set()
                    else:
                        self._on_control(note.payload)
            except asyncio.CancelledError:
                raise
            except psycopg.Error as exc:
                await self.listener.lost(exc)  # the lanes poll meanwhile
                await asyncio.sleep(next(waits))

    def _on_control(self, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            return
        if message.get("action") == "cancel":
            for job_id in message.get("ids", []):
                execution = self.inflight.get(job_id)
                if execution is not None:
                    log.info("job %s: cancelled by %s", job_id, message.get("by", "an operator"))
                    execution.cancel("cancelled")
        elif message.get("action") in ("resume", "wake"):
            self.maybe_more = True
            self.wakeup.set()

    async def _heartbeat_loop(self) -> None:
        last = 0.0
        while True:
            interval = max(0.2, min(5.0, self.min_lock / 3))
            if self.inflight or self.busy.is_set():
                await asyncio.sleep(min(interval, 0.5))  # a new claim may shorten the interval
            else:  # idle: the next beat, unless a job starts first
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.busy.wait(), timeout=interval)
            if time.monotonic() - last < interval:
                continue
            last = time.monotonic()
            # A beat that loses its connection goes again as soon as Postgres answers, not
            # a beat later: run() retries it.
            try:
                await self.aux.run(self._heartbeat, what="heartbeat")
            except psycopg.Error as exc:
                log.warning("heartbeat: %s; trying again at the next beat", describe(exc))

    async def _heartbeat(self, conn: psycopg.AsyncConnection) -> None:
        executions = list(self.inflight.values())
        async with conn.transaction():
            beat = await conn.execute(
                sql.WORKER_HEARTBEAT,
                {
                    "id": self.worker_id,
                    "in_flight": len(executions),
                    "is_leader": self.leader.is_leader,
                },
            )
            if beat.rowcount == 0:
                # Swept as stale (say, while Postgres was out of reach longer than
                # STALE_WORKER_AFTER) or deleted by hand: this worker is alive, so it
                # registers again rather than vanishing from the console for good.
                await conn.execute(sql.REGISTER_WORKER, self._registration())
                log.info("worker %s: its registration was gone; registered again", self.worker_id)
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
            if execution.job_id in asked and self.inflight.get(execution.job_id) is execution:
                execution.cancel("cancelled")
            if (
                execution.job_id not in held
                and not execution.completed_in_transaction  # ctx.atomic() moved the row
                and self.inflight.get(execution.job_id) is execution
            ):
                log.warning(
                    "job %s: lease lost (cancelled, rescued or removed); stopping it",
                    execution.job_id,
                )
                execution.cancel("lease lost")

    async def _idle(self) -> None:
        """Return at once while jobs run or output waits; else when a job starts."""
        if not self.inflight and not self.logs and not self.progress and not self.hints:
            self.busy.clear()
            await self.busy.wait()

    async def _flush_loop(self) -> None:
        while True:
            await self._idle()
            await asyncio.sleep(0.05)
            if self.logs or self.progress or self.hints:
                # Shielded: a stop mid-flush must not drop the lines already taken.
                await asyncio.shield(self._flush())

    async def _flush(self) -> None:
        """Write log lines and progress reports; then send the console's hints."""
        logs, self.logs = self.logs, []
        progress, self.progress = self.progress, {}
        hints, self.hints = self.hints, []
        if not logs and not progress and not hints:
            return
        self.progress_flushing = progress
        if logs or progress:
            job_ids = sorted({row[0] for row in logs} | set(progress))[:MAX_EVENT_IDS]
            hints.append(json.dumps({"type": "log" if logs else "progress", "ids": job_ids}))
            written: set[int] = set()
            try:
                await self.aux.run(
                    lambda conn: write_output(conn, logs, progress, written),
                    what="write logs",
                    attempts=3,
                )
            except (psycopg.Error, UnicodeError) as exc:
                if refused(exc):
                    await self._write_one_by_one(logs, progress, written, why_refused(exc))
                else:
                    log.warning("dropped %d log line(s) after repeated failures", len(logs))
            self._report_again(progress, written)
        # After the commit, in a transaction that writes nothing: no WAL flush to wait for
        # while holding the notify lock. Hints only: lost, the console catches up on its
        # next refresh.
        with contextlib.suppress(psycopg.Error):
            await self.aux.run(
                lambda conn: conn.execute(sql.NOTIFY_EVENTS, [hints]), what="hint", attempts=1
            )

    async def _write_one_by_one(
        self,
        logs: list[tuple[Any, ...]],
        progress: dict[int, tuple[int, float, str]],
        written: set[int],
        reason: str,
    ) -> None:
        """Write a refused batch line by line, so only what Postgres refuses is affected:
        such a line is kept as a note saying so, a progress report is dropped."""
        log.warning("Postgres refused a batch of job output (%s); writing it line by line", reason)

        async def write(lines: list[tuple[Any, ...]], reports: dict[int, Any]) -> None:
            done: set[int] = set()
            await self.aux.run(
                functools.partial(write_output, logs=lines, progress=reports, written=done),
                what="write logs",
                attempts=3,
            )
            written.update(done)

        for line in logs:
            try:
                await write([line], {})
            except (psycopg.Error, UnicodeError) as exc:
                if not refused(exc):
                    log.warning("job %s: dropped a log line after repeated failures", line[0])
                    continue
                note = f"[this line could not be stored: Postgres refused it ({why_refused(exc)})]"
                with contextlib.suppress(psycopg.Error):
                    await write([(*line[:-1], note)], {})
        for job_id, report in progress.items():
            with contextlib.suppress(psycopg.Error, UnicodeError):
                await write([], {job_id: report})

    def _report_again(self, progress: dict[int, tuple[int, float, str]], written: set[int]) -> None:
        """Progress the flush could not write (its row locked, PROGRESS_UNLOCKED) goes
        with the next flush, unless a newer report replaced it or the job has ended (its
        settle carried the report)."""
        for job_id, report in progress.items():
            execution = self.inflight.get(job_id)
            if (
                job_id not in written
                and job_id not in self.progress
                and execution is not None
                and execution.token == report[0]
            ):
                self.progress[job_id] = report

    async def _watchdog_loop(self) -> None:
        while True:
            await self._idle()
            await asyncio.sleep(0.25)
            now = time.monotonic()
            for execution in list(self.inflight.values()):
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
                    else:
                        self._abandon(execution, timeout)


LOG_COLUMNS = ("job_ids", "attempts", "seqs", "streams", "levels", "ats", "texts")


async def write_output(
    conn: psycopg.AsyncConnection,
    logs: list[tuple[Any, ...]],
    progress: dict[int, tuple[int, float, str]],
    written: set[int],
) -> None:
    """Write log lines and progress reports in one transaction; `written` gets the jobs
    whose report was written (a report on a row another transaction holds is not)."""
    async with conn.transaction():
        if logs:
            columns = [list(c) for c in zip(*logs, strict=True)]
            await conn.execute(sql.INSERT_LOGS, dict(zip(LOG_COLUMNS, columns, strict=True)))
        if progress:
            ids = list(progress)
            cur = await conn.execute(
                sql.PROGRESS_UNLOCKED,
                {
                    "ids": ids,
                    "tokens": [progress[i][0] for i in ids],
                    "fractions": [progress[i][1] for i in ids],
                    "messages": [progress[i][2] for i in ids],
                },
            )
            written.clear()
            written.update(row[0] for row in await cur.fetchall())


def refused(exc: BaseException) -> bool:
    """Whether Postgres (or psycopg, before sending) refused the data of a statement:
    SQLSTATE class 22 or 23, or text that cannot be encoded. Sent again, it fails again."""
    return isinstance(exc, psycopg.DataError | psycopg.IntegrityError | UnicodeError)


def why_refused(exc: BaseException) -> str:
    sqlstate = getattr(exc, "sqlstate", None)
    text = " ".join(str(exc).split())[:300]
    return storable(f"{sqlstate}: {text}" if sqlstate else text)


@dataclass
class SettleBatch:
    """Finished jobs grouped by how they finished, as the arrays the settle SQL takes."""

    succeeded: list[Outcome] = field(default_factory=list)
    failed: list[Outcome] = field(default_factory=list)
    retry: list[Outcome] = field(default_factory=list)
    snoozed: list[Outcome] = field(default_factory=list)
    released: list[Outcome] = field(default_factory=list)
    cancelled: list[Outcome] = field(default_factory=list)
    results: list[Outcome] = field(default_factory=list)
    progress: dict[int, tuple[int, float, str]] = field(default_factory=dict)
    places: list[tuple[str, int, int]] = field(default_factory=list)  # name, sent, place
    # Children of one flow node the settle counts down (the worker's FLOW_RELEASE_CHUNK),
    # and the places of the statements that may leave FlowRelease rows for the rest.
    chunk: int = 1000
    marking: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        """Whether there is anything to settle."""
        return bool(
            self.succeeded
            or self.failed
            or self.retry
            or self.snoozed
            or self.released
            or self.cancelled
            or self.results
            or self.progress
        )

    @functools.cached_property
    def flows(self) -> list[int]:
        """The flows whose state these outcomes may change (asked twice per settle)."""
        return sorted(
            {
                o.execution.flow_id
                for o in self.succeeded + self.failed + self.cancelled + self.results
                if o.execution.flow_id is not None
            }
        )

    @classmethod
    def of(cls, outcomes: list[Outcome]) -> SettleBatch:
        batch = cls()
        for outcome in sorted(outcomes, key=lambda o: o.execution.job_id):
            if outcome.kind == "dropped":
                execution = outcome.execution
                if execution.completed_in_transaction and (
                    outcome.result is not None or execution.flow_id is not None
                ):
                    batch.results.append(outcome)  # a flow node's children wait for it
                continue
            getattr(batch, outcome.kind).append(outcome)
        return batch

    def settle_in(self, script: Script) -> None:
        """Add the settle's transaction to `script`, and the refresh of its flows."""
        if self:
            script.raw("BEGIN")
            self.add_to(script)
            script.raw("COMMIT")
        if self.flows:
            # Again after the commit, with a fresh snapshot: two workers settling the
            # last nodes of a flow at once each see the other's node still live inside
            # their transactions, and neither would end the flow. The refresh that
            # starts last sees both commits.
            script.add(REFRESH_FLOWS, [self.flows])
            script.add(RELEASE_COUNTED, [self.flows])

    def add_to(self, script: Script) -> None:
        """Add the settle statements to a transaction `script` has begun."""

        def ids_tokens(items: list[Outcome]) -> dict[str, Any]:
            return {
                "ids": [o.execution.job_id for o in items],
                "tokens": [o.execution.token for o in items],
            }

        self.places = []
        statements: list[tuple[str, Prepared, list[Outcome], dict[str, Any]]] = []
        if self.progress:
            ids = sorted(self.progress)
            statements.append(
                (
                    "progress",
                    PROGRESS,
                    [],
                    {
                        "ids": ids,
                        "tokens": [self.progress[i][0] for i in ids],
                        "fractions": [self.progress[i][1] for i in ids],
                        "messages": [self.progress[i][2] for i in ids],
                    },
                )
            )
        plain = [o for o in self.succeeded if o.execution.flow_id is None]
        in_flows = [o for o in self.succeeded if o.execution.flow_id is not None]
        if plain:
            statements.append(
                (
                    "succeeded",
                    SETTLE_SUCCEEDED,
                    plain,
                    {**ids_tokens(plain), "results": [o.result for o in plain]},
                )
            )
        if in_flows:
            statements.append(
                (
                    "flow",
                    SETTLE_SUCCEEDED_FLOW,
                    in_flows,
                    {
                        **ids_tokens(in_flows),
                        "results": [o.result for o in in_flows],
                        "chunk": self.chunk,
                    },
                )
            )
        if self.failed:
            statements.append(
                (
                    "failed",
                    SETTLE_FAILED,
                    self.failed,
                    {**ids_tokens(self.failed), "errors": [o.error for o in self.failed]},
                )
            )
        if self.retry:
            statements.append(
                (
                    "retried",
                    SETTLE_RETRY,
                    self.retry,
                    {
                        **ids_tokens(self.retry),
                        "delays": [o.delay for o in self.retry],
                        "errors": [o.error for o in self.retry],
                    },
                )
            )
        if self.snoozed:
            statements.append(
                (
                    "snoozed",
                    SETTLE_SNOOZED,
                    self.snoozed,
                    {
                        **ids_tokens(self.snoozed),
                        "delays": [o.delay for o in self.snoozed],
                        "payloads": [o.payload for o in self.snoozed],
                    },
                )
            )
        if self.released:
            statements.append(("released", RELEASE, self.released, ids_tokens(self.released)))
        if self.cancelled:
            statements.append(
                ("cancelled", SETTLE_CANCELLED, self.cancelled, ids_tokens(self.cancelled))
            )
        for statement, items in (
            (RECORD_RESULT, [o for o in self.results if o.execution.flow_id is None]),
            (RECORD_RESULT_FLOW, [o for o in self.results if o.execution.flow_id is not None]),
        ):
            if items:
                params = {
                    "ids": [o.execution.job_id for o in items],
                    "results": [o.result for o in items],
                }
                if statement is RECORD_RESULT_FLOW:
                    params["chunk"] = self.chunk
                statements.append(("results", statement, items, params))
        self.marking = []
        for name, statement, items, params in statements:
            marks = statement in (SETTLE_SUCCEEDED_FLOW, RECORD_RESULT_FLOW)
            place = script.add(statement, params, rows=marks)
            self.places.append((name, len(items), place))
            if marks:
                self.marking.append(place)
        if self.flows:
            script.add(REFRESH_FLOWS, [self.flows])

    def runnable_now(self) -> tuple[list[str], bool]:
        """For sql.WAKE_LEFT: the queues of the jobs this settle makes runnable at once,
        and whether it counts down flow children (whose queues the settle notes itself)."""
        queues = sorted(
            {o.execution.queue for o in self.retry + self.snoozed + self.released if o.delay <= 0}
        )
        released = any(o.execution.flow_id is not None for o in self.succeeded + self.results)
        return queues, released

    def hints(self) -> list[str]:
        """The console's hints for these outcomes (ids only), MAX_EVENT_IDS jobs each."""
        changed = changed_outcomes(self)
        if not changed:
            return []
        queues = sorted({o.execution.queue for o in changed})
        flows = sorted({o.execution.flow_id for o in changed if o.execution.flow_id is not None})
        ids = [o.execution.job_id for o in changed]
        return [
            json.dumps(
                {
                    "type": "jobs",
                    "ids": ids[i : i + MAX_EVENT_IDS],
                    "queues": queues,
                    "flows": flows[:MAX_EVENT_IDS] if i == 0 else [],
                }
            )
            for i in range(0, len(ids), MAX_EVENT_IDS)
        ]

    def left_children(self, script: Script) -> bool:
        """Whether this settle left children of a flow node to count in chunks."""
        return any(row[-1] for place in self.marking for row in script.rows(place))

    def report(self, logger: logging.Logger, script: Script) -> None:
        stale: dict[str, int] = defaultdict(int)
        for name, sent, place in self.places:
            rowcount = script.rowcount(place)
            if name not in ("results", "flow", "progress") and 0 <= rowcount < sent:
                stale[name] += sent - rowcount
        for name, count in stale.items():
            logger.info(
                "%d %s job(s) were no longer ours (cancelled, rescued, or settled by "
                "a try whose commit went through unseen): left as is",
                count,
                name,
            )


def changed_outcomes(batch: SettleBatch) -> list[Outcome]:
    return (
        batch.succeeded
        + batch.failed
        + batch.retry
        + batch.snoozed
        + batch.released
        + batch.cancelled
    )
