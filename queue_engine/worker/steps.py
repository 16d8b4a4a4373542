"""Durable steps: `ctx.step(name, func, ...)` runs `func` once per job, across attempts.

A step's JSON result is recorded as soon as it returns. A later attempt of the same job
(after a failure, a crash or a lost lease) reads the recorded steps at its first step
and returns their results instead of running them again.

The claim reads the steps earlier attempts recorded, with the job. Steps are recorded by
one thread per process for all its handlers (StepWriter), in batches, each committed
before its handlers go on. Inside a transaction of the handler's own Django connection
(`ctx.atomic()`, or any `transaction.atomic()`), the step is recorded in that
transaction instead, so its record commits, or rolls back, with the block.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from queue_engine import sql
from queue_engine.conf import snapshot
from queue_engine.exceptions import LeaseLost, PayloadError, StepError
from queue_engine.payloads import dump_json, text_problem

if TYPE_CHECKING:
    from collections.abc import Callable

    from queue_engine.worker.execution import Execution

MISSING: Any = object()


class StepWriter:
    """One thread and one connection per process that record the steps of all its
    handlers, a batch per round trip and per commit.

    A worker runs up to hundreds of plain-function handlers in threads: a connection per
    thread would open as many, and a statement and a commit per step would make handlers
    queue for connections. Handlers hand their request over and wait for its batch.
    """

    def __init__(self) -> None:
        # A step to record (RECORD_COLUMNS), or a signal to consume (sql.CONSUME_SIGNAL's
        # parameters, a dict: worker/waits.py).
        self.pending: list[tuple[tuple[Any, ...] | dict[str, Any], Future[Any]]] = []
        self.wake = threading.Condition()
        self.thread: threading.Thread | None = None

    def submit(self, args: tuple[Any, ...] | dict[str, Any]) -> Future[Any]:
        """Record a step (RECORD_COLUMNS), the future saying whether its job is still
        held; or consume a signal (a dict), the future giving sql.CONSUME_SIGNAL's row."""
        future: Future[Any] = Future()
        with self.wake:
            self.pending.append((args, future))
            if self.thread is None or not self.thread.is_alive():
                # Started on first use: a worker whose handlers record no step has none.
                # Started again should it have died (a BaseException out of a write):
                # the steps handed over since would wait for it forever.
                self.thread = threading.Thread(
                    target=self._run, name="queue_engine steps", daemon=True
                )
                self.thread.start()
            self.wake.notify()
        return future

    def _run(self) -> None:
        conn = None
        while True:
            with self.wake:
                while not self.pending:
                    self.wake.wait()
                batch, self.pending = self.pending[:MAX_BATCH], self.pending[MAX_BATCH:]
            try:
                if conn is None or conn.closed:
                    conn = self._connect()
                self._write(conn, batch)
            except BaseException as exc:
                if conn is not None:
                    conn.close()
                for _args, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise  # the next submit starts another thread

    @staticmethod
    def _connect() -> Any:
        import psycopg

        from queue_engine.connections import conninfo

        return psycopg.connect(conninfo(session=True, application_name="queue_engine steps"))

    @staticmethod
    def _write(
        conn: Any, batch: list[tuple[tuple[Any, ...] | dict[str, Any], Future[Any]]]
    ) -> None:
        steps = [(args, future) for args, future in batch if isinstance(args, tuple)]
        if steps:
            columns = zip(*(args for args, _future in steps), strict=True)
            with conn.transaction(), conn.cursor() as cursor:
                cursor.execute(
                    sql.RECORD_STEPS, dict(zip(RECORD_COLUMNS, map(list, columns), strict=True))
                )
                held = [row[1] for row in cursor.fetchall()]
            for (_args, future), ours in zip(steps, held, strict=True):
                future.set_result(ours)
        for args, future in batch:
            if isinstance(args, dict):  # each in a transaction of its own: few, and rare
                with conn.transaction(), conn.cursor() as cursor:
                    cursor.execute(sql.CONSUME_SIGNAL, args)
                    future.set_result(cursor.fetchone())


MAX_BATCH = 1000
RECORD_COLUMNS = ("jobs", "names", "attempts", "results", "started", "tokens")
WRITER = StepWriter()


class Steps:
    """The steps of one attempt: those recorded before it, and the names it used."""

    __slots__ = ("execution", "recorded", "used", "waits")

    def __init__(self, execution: Execution) -> None:
        self.execution = execution
        # The steps earlier attempts recorded, by name, as the claim read them (sql.CLAIM's
        # `steps`), and those this attempt records.
        self.recorded: dict[str, Any] = json.loads(execution.recorded_steps or "{}")
        self.used: set[str] = set()
        self.waits: dict[str, int] = {}  # waits reached this attempt, by kind (worker/waits.py)

    def run(self, name: str, func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        stored = self.lookup(name)
        if stored is not MISSING:
            return stored
        started = datetime.now(UTC)
        try:
            result = func(*args, **kwargs)
        except BaseException:
            self.used.discard(name)  # it did not finish: the handler may try it again
            raise
        self.record(name, result, self.encode(name, result), started)
        return result

    async def arun(self, name: str, func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        stored = self.lookup(name)
        if stored is not MISSING:
            return stored
        started = datetime.now(UTC)
        try:
            result = func(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        except BaseException:
            self.used.discard(name)
            raise
        await self.arecord(name, result, self.encode(name, result), started)
        return result

    def check(self, name: str) -> None:
        """Refuse a name that cannot be recorded, or that this job used already."""
        if not isinstance(name, str) or not name or len(name) > 255:
            raise StepError(f"a step's name must be a string of 1 to 255 characters, not {name!r}")
        problem = text_problem(name)
        if problem is not None:
            raise StepError(f"the step name {name!r} {problem}")
        if name in self.used:
            raise StepError(
                f"step {name!r} ran already in this job: step names are unique within a "
                "job (add the item's id to a step run in a loop, e.g. f'charge-{order.id}')"
            )
        self.used.add(name)

    def lookup(self, name: str) -> Any:
        """Check the name; return the step's recorded result, or MISSING when it must run
        (and may: the job was not told to stop)."""
        self.check(name)
        if name in self.recorded:
            self.execution.write_log("log", f"step {name!r}: recorded earlier, not run again")
            return self.recorded[name]
        execution = self.execution
        if execution.cancelled.is_set():
            raise LeaseLost(
                f"job {execution.job_id} was told to stop ({execution.cancel_reason}): "
                f"step {name!r} does not start"
            )
        return MISSING

    def encode(self, name: str, result: Any) -> str:
        try:
            return dump_json(
                result,
                what=f"{self.execution.kind}: the result of step {name!r}",
                max_bytes=snapshot()["MAX_PAYLOAD_BYTES"],
            )
        except PayloadError as exc:
            raise StepError(str(exc)) from None

    def record(self, name: str, result: Any, text: str, started: datetime) -> None:
        from django.db import connection

        args = self._record_args(name, text, started)
        if connection.in_atomic_block:  # commits, or rolls back, with the handler's block
            with connection.cursor() as cursor:
                params = dict(zip(RECORD_COLUMNS, ([a] for a in args), strict=True))
                cursor.execute(sql.RECORD_STEPS, params)
                held = bool(cursor.fetchone()[1])
        else:
            held = WRITER.submit(args).result()
        self._recorded(name, result, held)

    async def arecord(self, name: str, result: Any, text: str, started: datetime) -> None:
        args = self._record_args(name, text, started)
        held = await asyncio.wrap_future(WRITER.submit(args))
        self._recorded(name, result, held)

    def _record_args(self, name: str, text: str, started: datetime) -> tuple[Any, ...]:
        execution = self.execution
        return (execution.job_id, name, execution.attempt, text, started, execution.token)

    def _recorded(self, name: str, result: Any, held: bool) -> None:
        execution = self.execution
        self.recorded[name] = result
        execution.touch()  # a step that returns proves liveness, as progress does
        if not held:
            raise LeaseLost(
                f"job {execution.job_id} is no longer held by this worker: step {name!r} "
                "is recorded, and the rest of this attempt stops"
            )
