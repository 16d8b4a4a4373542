"""The claim lanes: claim jobs, start them, and settle the finished ones, in one round
trip per batch; and, at the shutdown timeout, give back what still runs."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from queue_engine import sql
from queue_engine.worker.execution import ClaimedJob, Execution, Outcome
from queue_engine.worker.flusher import Output
from queue_engine.worker.giveback import hand_over
from queue_engine.worker.logsetup import report_finished
from queue_engine.worker.options import WorkerOptions
from queue_engine.worker.quarantine import Quarantine
from queue_engine.worker.reconnecting import ReconnectingConnection
from queue_engine.worker.round_trip import RELEASE_RETRY, ClaimState, RoundTrip, claim_request
from queue_engine.worker.settle import SettleBatch, refused, settle_one_by_one, why_refused
from queue_engine.worker.shared import Shared
from queue_engine.worker.threads import HandlerThreads
from queue_engine.worker.weights import QueueWeights

log = logging.getLogger("queue_engine.worker")

LANES = 2
# A claim that took fewer jobs than it wanted and left candidates behind (a cap, a busy
# key's room, the rate limit: sql.CLAIM's `held`) is followed by another this soon, not
# at the next poll; the wait doubles while such claims come back empty, to the poll interval.
HELD_BACK_FIRST = 0.01
# At the shutdown timeout, handlers are told to stop and get this long to heed it
# (ctx.sleep() returns, async handlers are cancelled) before their jobs are given back.
SHUTDOWN_GRACE = 0.5
# How long a stopping worker waits for Postgres to give jobs back, settle and say
# goodbye; out of reach longer, it leaves that to the leases. And a backstop: a stop
# that overruns the shutdown timeout by STOP_OVERDUE ends the process there.
STOP_PATIENCE = 1.0
STOP_OVERDUE = SHUTDOWN_GRACE + 3 * STOP_PATIENCE


class Lanes:
    """Two lanes on two connections let one lane's round trip to Postgres overlap the
    other lane's Python work; they share the slots and the finished jobs."""

    def __init__(
        self,
        options: WorkerOptions,
        worker_id: str,
        shared: Shared,
        output: Output,
        threads: HandlerThreads,
        *,
        promote: Callable[[], Awaitable[int]],
    ) -> None:
        self.options = options
        self.worker_id = worker_id
        self.concurrency = max(1, options.concurrency)
        self.shared = shared
        self.output = output
        self.threads = threads
        self.promote = promote  # burst mode: promote due jobs before running dry
        self.flow_chunk = max(1, options.flow_release_chunk)
        self.claimer = ReconnectingConnection(options.conninfo, "claimer", sql.LANE_SETTINGS)
        self.extra_lanes: list[ReconnectingConnection] = []
        self.lane_share = self.concurrency
        self.stopping = False
        self.finished = False
        self.deadline: float | None = None
        self.reserved = 0  # slots promised to claims in flight
        self.held_back_delay: float | None = None
        self._held_back_timer: asyncio.TimerHandle | None = None
        self.state = ClaimState()  # how the next claim goes, from what the last met
        # Suspects run alone, on the one worker that holds their queue's right.
        self.quarantine = Quarantine(
            options.conninfo, options.poll_interval, wake=self.shared.wakeup.set
        )
        self.claimed_total = 0
        self.weights = QueueWeights(options.queues, options.queue_weights)

    def stop(self) -> None:
        """No more claims: the lanes settle what runs, up to the shutdown timeout."""
        self.stopping = True
        self.shared.wakeup.set()

    def free_slots(self) -> int:
        return 0 if self.stopping else self.concurrency - len(self.shared.inflight) - self.reserved

    def connections(self) -> list[ReconnectingConnection]:
        return [self.claimer, *self.extra_lanes, self.quarantine.connection]

    async def run(self) -> None:
        """Run the claim lanes until the worker stops (or, in burst mode, runs dry).

        Two lanes on two connections let one lane's round trip to Postgres overlap
        the other lane's Python work; they share the slots and the finished jobs.
        """
        lanes = [self.claimer] + [
            ReconnectingConnection(self.options.conninfo, f"claimer-{i}", sql.LANE_SETTINGS)
            for i in range(1, min(LANES, self.concurrency))
        ]
        self.extra_lanes = lanes[1:]
        self.lane_share = -(-self.concurrency // len(lanes))
        await asyncio.gather(*(self._lane(conn) for conn in lanes))

    async def _lane(self, conn: ReconnectingConnection) -> None:
        """One lane's loop: settle what ended and claim what there is room for, one round
        trip at a time, until the worker stops (or, in burst mode, runs dry)."""
        state = self.state
        while not self.finished:
            if self.stopping and await self._stopped(conn):
                return
            want, alone = self._wanted()
            if not self.shared.outcomes and want == 0:
                if await self._idle(conn):
                    return
                continue
            if state.another_claim_suffices(want, bool(self.shared.outcomes)):
                await self._wait(self.deadline, self.options.poll_interval)
                continue
            settle_only = state.settles_only(want)
            if settle_only:
                want = 0
                if not self.shared.outcomes:
                    await self._wait(self.deadline, self.options.poll_interval)
                    continue
            await self._round(conn, want, alone, settle_only=settle_only)

    async def _stopped(self, conn: ReconnectingConnection) -> bool:
        """While stopping: whether this lane is done (nothing runs, or the shutdown
        timeout came and what still ran was given back)."""
        if self.deadline is None:
            self.deadline = time.monotonic() + self.options.shutdown_timeout
            self.quarantine.let_go()  # another worker runs the suspects
        if not self.shared.inflight and not self.shared.outcomes and not self.reserved:
            self._finish()
            return True
        if time.monotonic() >= self.deadline and not self.reserved:
            await self._give_back(conn)
            self._finish()
            return True
        return False

    def _wanted(self) -> tuple[int, list[str] | None]:
        """How many jobs to claim, and the queues of a claim alone (a suspect's)."""
        # While claims take turns (ClaimState.serial) one lane claims for the whole
        # worker: the other only settles meanwhile.
        free = self.free_slots()
        if not self.state.serial:
            free = min(free, self.lane_share)
        # A settle claims too, in the same round trip, even after a claim came up
        # short: the jobs it ends free room under their queue's cap and group caps,
        # so the jobs a cap held back start now rather than at the next poll.
        more = self.shared.maybe_more or bool(self.shared.outcomes)
        want = free if free > 0 and not self.stopping and more else 0
        busy = bool(self.shared.inflight or self.reserved or self.state.claiming)
        return self.quarantine.claim(want, busy=busy, stopping=self.stopping)

    async def _idle(self, conn: ReconnectingConnection) -> bool:
        """Nothing to settle or claim: wait for a hint, a finished job or the poll; in
        burst mode, promote what is due or finish. Whether this lane is done."""
        shared = self.shared
        burst_dry = not (shared.inflight or shared.maybe_more or self.reserved)
        if self.options.burst and burst_dry:
            promoted = await self.promote()
            if not promoted and not (
                shared.inflight or self.reserved or shared.outcomes or shared.counting
            ):
                self._finish()  # re-checked: the other lane may have claimed meanwhile
                return True
            shared.maybe_more = True
            return False
        # One lane polls; the others wake on a hint, a finished job, or rarely.
        poll = self.options.poll_interval * (1 if conn is self.claimer else 5)
        await self._wait(self.deadline, poll)
        return False

    async def _round(
        self, conn: ReconnectingConnection, want: int, alone: list[str] | None, *, settle_only: bool
    ) -> None:
        """Settle what ended and claim `want` jobs, in one round trip; start them."""
        state, shared = self.state, self.shared
        outcomes, shared.outcomes = shared.outcomes, []
        freed, woken = state.freed_meanwhile, shared.woken
        # A fan-out's children left to count: counted down and taken (COUNT_DOWN_CLAIM).
        counts_down = bool(want) and state.releasing and alone is None
        merged = state.merged(want, alone)
        if want:
            state.claiming += 1
        self.reserved += want
        try:
            rows, token = await self._settle_and_claim(
                conn, outcomes, want, alone, merged=merged, counts_down=counts_down
            )
        finally:
            self.reserved -= want
            if want:
                state.claiming -= 1
                if state.serial:
                    shared.wakeup.set()  # the other lane may claim now
        marker_rows = [row for row in rows if row[0] is None]  # sql.CLAIM's markers
        markers = {row[1] for row in marker_rows}
        if markers:
            rows = [row for row in rows if row[0] is not None]
        if settle_only:
            # The room this settle freed may have come too late for the claim on its
            # way: the next claim looks again at once.
            state.freed_meanwhile += 1
            shared.maybe_more = True
        if counts_down:
            counted = sum(row[4] for row in marker_rows if row[1] == "counted")
            if state.released(counted, len(rows), want, time.monotonic()):
                self._look_again()
            else:  # no range was free: when the claims holding them are done
                asyncio.get_running_loop().call_later(RELEASE_RETRY, self._look_again)
        elif want:
            news = freed != state.freed_meanwhile or shared.woken != woken
            self._claimed(len(rows), want, merged, marker_rows, news, alone)
        if not merged and any(
            o.execution.flow_id is not None
            or (o.kind in ("retry", "snoozed", "released") and o.delay <= 0)
            for o in outcomes
        ):
            # This settle may have made jobs runnable, after its claim (a merged claim
            # saw them; what a fan-out's count-down releases later wakes the workers).
            shared.maybe_more = True
        for row in rows:
            self._start(row, token)
        if alone is not None:
            self.quarantine.claimed_alone(rows)
        elif "suspects" in markers:
            self.quarantine.seen(r[2] for r in marker_rows if r[1] == "suspects")
        if rows:
            await asyncio.sleep(0)  # let quick handlers finish: their settle joins this batch

    def _claimed(
        self,
        claimed: int,
        want: int,
        merged: bool,
        marker_rows: list[tuple[Any, ...]],
        news: bool,
        alone: list[str] | None,
    ) -> None:
        """After a claim of available jobs: whether there may be more to claim, how the
        next goes, and when to claim again if limits held it back."""
        markers = {row[1] for row in marker_rows}
        rate_waits = [row[4] / 1000 for row in marker_rows if row[1] == "rate"]
        self._held_back("held" in markers, bool(claimed), min(rate_waits, default=None))
        full = claimed >= want
        self.state.backlog = full
        self.state.release_next(claimed, want, markers, time.monotonic())
        self.shared.maybe_more = (
            full
            or news  # room freed, or a hint, while the claim was on its way
            # It passed over a queue the next claim takes: that claim, now.
            or self.state.passed_over(markers, merged)
            or self.state.releasing  # a fan-out's children to count down next
            or alone is not None  # it looked for nothing but a suspect
        )
        if self.shared.maybe_more:
            self.shared.wakeup.set()  # the other lane claims beside this one
        self.state.heard(markers)

    def _held_back(self, held: bool, claimed: bool, rate_wait: float | None = None) -> None:
        """After a claim: if it left work it could not take, claim again soon; when a
        rate limit held it back, when the limit's window next frees room."""
        if self._held_back_timer is not None:
            self._held_back_timer.cancel()
            self._held_back_timer = None
        if not held and rate_wait is None:
            self.held_back_delay = None
            return
        if claimed or self.held_back_delay is None:
            self.held_back_delay = HELD_BACK_FIRST
        elif held:
            self.held_back_delay = min(self.held_back_delay * 2, self.options.poll_interval)
        delay = self.held_back_delay if held else self.options.poll_interval
        if rate_wait is not None:
            delay = min(delay, max(rate_wait, HELD_BACK_FIRST))
        self._held_back_timer = asyncio.get_running_loop().call_later(delay, self._claim_again)

    def _claim_again(self) -> None:
        self._held_back_timer = None
        self._look_again()

    def _look_again(self) -> None:
        self.shared.maybe_more = True
        self.shared.wakeup.set()

    def _finish(self) -> None:
        self.finished = True
        self.shared.wakeup.set()

    async def _wait(self, deadline: float | None, poll: float) -> None:
        timeout = poll
        if deadline is not None:
            timeout = max(0.0, min(timeout, deadline - time.monotonic()))
        try:
            await asyncio.wait_for(self.shared.wakeup.wait(), timeout=timeout)
        except TimeoutError:
            # A poll: notifications may have been lost, and jobs may wait behind floors.
            self.shared.maybe_more = True
            self.shared.floors.look_behind = True
        self.shared.wakeup.clear()

    def _start(self, row: tuple[Any, ...], token: int) -> None:
        job = ClaimedJob._make(row)
        execution = Execution(job, token, worker_id=self.worker_id, output=self.output)
        self.shared.min_lock = min(self.shared.min_lock, float(job.lock_seconds))
        self.shared.inflight[execution.job_id] = execution
        self.shared.busy.set()
        self.claimed_total += 1
        if not execution.is_async and execution.definition is not None:
            self.threads.submit(execution)
            return
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
            outcome = execution.failure(exc, retryable=True)
        self.finished_jobs([outcome])

    def finished_jobs(self, outcomes: list[Outcome]) -> None:
        """Jobs that ended (an async task, a batch from the handler threads): settle them."""
        inflight = self.shared.inflight
        for outcome in outcomes:
            inflight.pop(outcome.execution.job_id, None)
        report_finished(outcomes)
        self.shared.outcomes.extend(outcomes)
        self.shared.wakeup.set()

    async def _settle_and_claim(
        self,
        lane: ReconnectingConnection,
        outcomes: list[Outcome],
        want: int,
        alone: list[str] | None = None,
        *,
        merged: bool = False,
        counts_down: bool = False,
    ) -> tuple[list[tuple[Any, ...]], int]:
        """Settle finished jobs and claim the next batch, in one round trip: in one
        transaction if `merged`, else the settle's commit first. `counts_down`: the claim
        takes a fan-out's children as it counts them down (sql.COUNT_DOWN_CLAIM)."""
        token = random.getrandbits(62)
        batch = self._batch(outcomes)
        floors = self.shared.floors
        # The floors follow claims of available jobs only: a fan-out's children taken
        # as they are released were never in the claim index, and a floor past them
        # would pass over jobs that are.
        floor_params, numbered = (
            floors.for_claim(alone is not None) if want and not counts_down else ({}, 0)
        )
        statement, params = claim_request(
            self.options,
            self.weights,
            self.worker_id,
            want,
            alone,
            token,
            floor_params,
            merged=merged,
            counts_down=counts_down,
            fair=self.state.full,
        )
        trip = RoundTrip(batch, params, statement, want, merged, *batch.runnable_now())
        trip.counts_down, trip.stopping = counts_down, lambda: self.stopping
        try:
            rows = await lane.run(trip, what="settle and claim")
        except BaseException as exc:
            if want and not counts_down:
                floors.dropped(numbered)
            if not isinstance(exc, psycopg.Error | UnicodeError):
                raise
            await self._round_failed(lane, outcomes, batch, exc)
            return [], token
        if want:
            if not counts_down:
                floors.claimed(numbered, (row for row in rows if row[0] is not None))
            self.weights.claimed(row[2] for row in rows if row[0] is not None)
        self._after_settle(batch, trip)
        return rows, token

    def _after_settle(self, batch: SettleBatch, trip: RoundTrip) -> None:
        """After a settle: its report, the rest of a fan-out to count, the hints."""
        if trip.sent:
            batch.report(log, trip.sent[-1])
            if batch.left_children(trip.sent[-1]):
                # The rest of a big fan-out: this worker's claims take it as they count
                # it down, and so do the others' (their claims see it is there);
                # _count_down_loop splits it and releases what no claim takes.
                self.shared.counting_down.set()
                self.state.releasing = True
                self._look_again()
        hints = batch.hints()
        if hints:
            self.output.hints.extend(hints)
            self.shared.busy.set()  # the flusher sends them

    def _batch(self, outcomes: list[Outcome]) -> SettleBatch:
        """The settle of these outcomes, with the progress they have not flushed yet: a
        job's last report goes in before its row moves, never lost to the race with its
        completion."""
        batch = SettleBatch.of(outcomes)
        batch.chunk = self.flow_chunk
        for outcome in outcomes:
            job_id = outcome.execution.job_id
            pending = self.output.progress.pop(job_id, None) or self.output.flushing.get(job_id)
            if pending is not None:
                batch.progress[job_id] = pending
        return batch

    async def _round_failed(
        self,
        lane: ReconnectingConnection,
        outcomes: list[Outcome],
        batch: SettleBatch,
        exc: BaseException,
    ) -> None:
        """A round trip that Postgres refused or that broke: a refused settle goes again
        one job at a time; anything else is left to the leases."""
        if not (batch and refused(exc)):
            log.exception("settle and claim failed; the jobs will be rescued after their lease")
            return
        log.warning(
            "Postgres refused a settle of %d job(s) (%s); settling them one by one",
            len(outcomes),
            why_refused(exc),
        )
        await settle_one_by_one(
            lane,
            outcomes,
            batch.progress,
            chunk=self.flow_chunk,
            worker_id=self.worker_id,
            settled=self._settled,
        )
        self.shared.maybe_more = True  # the claim did not run

    def _settled(self, hints: list[str], left_children: bool) -> None:
        """After a settle apart from a claim: what it leaves the count-down and the flusher."""
        if left_children:
            self.shared.counting_down.set()
        self.output.hints.extend(hints)
        self.shared.busy.set()

    async def _give_back(self, lane: ReconnectingConnection) -> None:
        """At the shutdown timeout: tell the running handlers to stop, settle what ends
        within SHUTDOWN_GRACE, and give the rest back to their queues."""
        self.finished = True  # the other lane must not give back too
        for execution in list(self.shared.inflight.values()):
            execution.cancel("shutdown")
        grace = time.monotonic() + SHUTDOWN_GRACE
        while self.shared.inflight and time.monotonic() < grace:
            await self._wait(grace, SHUTDOWN_GRACE)
        outcomes, self.shared.outcomes = self.shared.outcomes, []
        running = list(self.shared.inflight.values())
        self.shared.inflight.clear()
        for execution in running:
            if execution.task is None:
                # Before the release: a job given back must not start in a thread here
                # (one still waiting for a thread never will), and what a running thread
                # returns is dropped.
                self.threads.drop(execution)
        try:
            await asyncio.wait_for(
                hand_over(lane, outcomes, running, self.threads, settle=self._settle_and_claim),
                STOP_PATIENCE,
            )
        except TimeoutError:
            log.warning(
                "Postgres did not answer while giving jobs back: %d job(s) come back after "
                "their lease",
                len(outcomes) + len(running),
            )
        for execution in running:
            if execution.task is not None:
                execution.task.cancel()
