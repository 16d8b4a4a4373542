"""The threads plain-function handlers run in.

The loop hands them whole claims at once: jobs wait in one queue, and a thread that
finishes a job takes the next one without sleeping. How many threads are woken (or
started, up to the worker's concurrency) for waiting jobs depends on how long the
handlers take:
- quick ones (under SLOW_HANDLER on average, a few tens of microseconds for a plain
  computation): one thread at a time is on its way to them, so they run back to back on
  one or two threads rather than waking a thread each for work that ends before the
  thread is up;
- ones that wait (the ORM waiting on Postgres, sleeps, HTTP): a thread for each waiting
  job at once. Woken one after another, a claim of ten such jobs would start its tenth
  only after nine wake-ups in a row, each waiting for a CPU and the GIL on a busy
  machine, while threads sleep.
The most recently idle thread is woken first, with its warm Django connection; a thread
idle for IDLE_EXIT closes its connections and ends.

Finished jobs go back to the loop in batches: one wake-up of the loop for all the jobs
that finished while it was busy, not one per job.

A handler that outlives its job's idle timeout is abandoned (Python cannot stop a
thread): its job settles without it, its thread no longer counts against the
concurrency, and what it returns is dropped; the thread serves again afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from queue_engine.worker.execution import Execution, Outcome

log = logging.getLogger("queue_engine.worker")

# An idle thread ends after this long (closing its Django connections with it).
IDLE_EXIT = 60.0
# Handlers that take this long on average (wall clock, from a thread's start of the job
# to its end) get a thread for each waiting job; quicker ones share one or two threads.
# A thread's wake-up costs tens of microseconds on an idle machine and a millisecond or
# so on a busy one.
SLOW_HANDLER = 0.001
# The average is exponential, with this weight for the newest job, and a job counts
# for at most RUN_CAP: it follows a change of workload within a few dozen jobs, and one
# long job (an hour's HTTP call) does not hold quick ones apart for thousands of jobs.
RUN_WEIGHT = 0.05
RUN_CAP = 10 * SLOW_HANDLER


class _Hand:
    """One thread's parking place: a lock held while the thread may sleep on it."""

    __slots__ = ("wake",)

    def __init__(self) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()


class HandlerThreads:
    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        # Executions whose plain function runs in a thread now, in flight or abandoned
        # (an idle timeout, a give-back at shutdown); changed by the threads themselves.
        self.running: set[Execution] = set()
        self._lock = threading.Lock()
        self._waiting: deque[Execution] = deque()
        self._parked: list[_Hand] = []
        self._threads = 0  # threads that count against the concurrency
        self._on_the_way = 0  # threads woken or started that have not looked for work yet
        self._run_time = 0.0  # the handlers' average wall-clock time, seconds (RUN_WEIGHT)
        self._dropped: set[Execution] = set()  # their outcome must not be delivered
        self._done: list[Outcome] = []
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deliver: Callable[[list[Outcome]], None] | None = None

    def bind(
        self, loop: asyncio.AbstractEventLoop, deliver: Callable[[list[Outcome]], None]
    ) -> None:
        """Where finished jobs go: `deliver`, called on `loop` with a batch of outcomes."""
        self._loop = loop
        self._deliver = deliver

    # --- the loop's side ----------------------------------------------------------

    def submit(self, execution: Execution) -> None:
        with self._lock:
            self._waiting.append(execution)
            start = self._more_hands()
        self._start_threads(start)

    def drop(self, execution: Execution) -> bool:
        """Settle `execution` without its thread: what the thread does from now on is
        dropped. False if its outcome is already on its way to the loop."""
        with self._lock:
            if execution in self._dropped:
                return False
            if execution in self.running:
                # Its thread no longer counts: another may start in its place.
                self._threads -= 1
                self._dropped.add(execution)
            elif execution in self._waiting:
                self._waiting.remove(execution)  # it never starts
            else:
                return False  # finished: its outcome is in _done or delivered
            start = self._more_hands()
        self._start_threads(start)
        return True

    def abandon(self, execution: Execution, timeout: float) -> bool:
        """A plain function past its idle timeout: its job settles now without it."""
        if not self.drop(execution):
            return False
        log.warning(
            "job %s: idle for more than %ss; abandoning its handler thread "
            "(%d abandoned handler thread(s) in this process)",
            execution.job_id,
            timeout,
            self.abandoned(),
        )
        return True

    def abandoned(self) -> int:
        return sum(1 for e in list(self.running) if e.cancel_reason == "idle timeout")

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            self._waiting.clear()
            parked, self._parked = self._parked, []
        for hand in parked:
            hand.wake.release()

    def _flush(self) -> None:
        with self._lock:
            done, self._done = self._done, []
        if done and self._deliver is not None:
            self._deliver(done)

    # --- the threads' side --------------------------------------------------------

    def _more_hands(self) -> int:
        """Under the lock: wake threads for the waiting jobs; how many to start."""
        if self._closed:
            return 0
        if self._run_time >= SLOW_HANDLER:
            wanted = len(self._waiting) - self._on_the_way
        else:
            wanted = 1 if self._waiting and not self._on_the_way else 0
        start = 0
        while wanted > 0:
            if self._parked:
                self._parked.pop().wake.release()
            elif self._threads < self.concurrency:
                self._threads += 1
                start += 1
            else:
                break
            self._on_the_way += 1
            wanted -= 1
        return start

    def _start_threads(self, count: int) -> None:
        for _ in range(count):
            thread = threading.Thread(target=self._work, name="job", daemon=True)
            thread.start()

    def _work(self) -> None:
        from django.db import connections

        from queue_engine.worker.handler_connections import check_connections, tidy_connections

        hand = _Hand()
        arrived = True  # started to look for work: counted in _on_the_way
        while True:
            with self._lock:
                if arrived:
                    self._on_the_way -= 1
                    arrived = False
                if self._closed:
                    self._threads -= 1
                    return
                execution = self._waiting.popleft() if self._waiting else None
                if execution is None:
                    self._parked.append(hand)
                else:
                    self.running.add(execution)
                    start = self._more_hands()
            if execution is None:
                if hand.wake.acquire(timeout=IDLE_EXIT):
                    arrived = True
                    continue
                with self._lock:
                    leave = hand in self._parked
                    if leave:
                        self._parked.remove(hand)
                        self._threads -= 1
                if leave:
                    connections.close_all()
                    return
                hand.wake.acquire()  # woken just as the wait ran out
                arrived = True
                continue
            self._start_threads(start)
            if execution.cancelled.is_set():
                # Told to stop (an operator's cancel) while it waited for a thread: it
                # does not start.
                if not self._finished(execution, execution.cancelled_outcome()):
                    return
                continue
            began = time.perf_counter()
            check_connections()
            try:
                outcome = execution.run_sync()
            finally:
                tidy_connections()
            # Unlocked: a lost update among threads only nudges the average.
            took = min(time.perf_counter() - began, RUN_CAP)
            self._run_time += RUN_WEIGHT * (took - self._run_time)
            if not self._finished(execution, outcome):
                return

    def _finished(self, execution: Execution, outcome: Outcome) -> bool:
        """Hand `outcome` to the loop; False if this thread is to end."""
        with self._lock:
            self.running.discard(execution)
            dropped = execution in self._dropped
            if dropped:
                self._dropped.discard(execution)
                serve = not self._closed and self._threads < self.concurrency
                if serve:
                    self._threads += 1  # back in service
            else:
                self._done.append(outcome)
                first = len(self._done) == 1
        if dropped:
            if execution.cancel_reason == "idle timeout":
                log.info(
                    "job %s: its abandoned handler returned; what it did is dropped "
                    "(%d abandoned handler thread(s) left in this process)",
                    execution.job_id,
                    self.abandoned(),
                )
            return serve
        if first and self._loop is not None:
            # A closed loop: the worker is gone, and the job's lease brings it back.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._flush)
        return True
