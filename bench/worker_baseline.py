"""The hand-written worker baseline: a minimal psycopg 3 claim/complete loop.

It works the baseline table (`bench_baseline_job`, see bench/baseline.py) the way a
minimal Postgres queue does, with nothing of queue_engine's: no leases, no history
table, no fencing, no caps. Each round is one transaction that first deletes the
previous batch's finished jobs (or marks them done), puts its failed ones back
(`state = 'available'`, the attempt counted, `run_at = now()`), then claims the
next batch of up to BATCH jobs with `SELECT ... FOR UPDATE SKIP LOCKED LIMIT n`
and an `UPDATE ... RETURNING` that records the claim time on the row (`claimed_at`).

`start()` runs the loop in processes of its own (multiprocessing, spawn: no Django in
them). They connect, say they are ready, and wait for `go()`, so that connecting and
importing are never timed. `go()` closes the write end of a pipe the loops wait on:
a multiprocessing.Event's set() would wait, for good, for a loop that died asleep on
it. In "drain" mode a process exits when a claim finds nothing;
in "listen" mode it LISTENs on the table's NOTIFY channel (`bench_wake`, sent by the
table's insert trigger) between empty claims, until `stop()`.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Literal

import psycopg

from bench.baseline import TABLE

BATCH = 100
WAKE_CHANNEL = "bench_wake"

CLAIM = f"""
WITH picked AS (
    SELECT id FROM {TABLE}
     WHERE state = 'available' AND queue = %(queue)s AND run_at <= now()
     ORDER BY priority DESC, run_at, id
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE {TABLE} j SET state = 'running', claimed_at = now()
  FROM picked
 WHERE j.id = picked.id
RETURNING j.id, j.payload, j.attempt
"""
DELETE_DONE = f"DELETE FROM {TABLE} WHERE id = ANY(%s)"
MARK_DONE = f"UPDATE {TABLE} SET state = 'done' WHERE id = ANY(%s)"
PUT_BACK = (
    f"UPDATE {TABLE} SET state = 'available', attempt = attempt + 1, run_at = now() "
    "WHERE id = ANY(%s)"
)

Handler = Literal["noop", "flaky", "update"]
Finish = Literal["delete", "done"]


def _noop(payload: dict[str, Any], attempt: int) -> None:
    """The handler: does nothing, like bench.jobs' no-op kinds."""


def _flaky(payload: dict[str, Any], attempt: int) -> None:
    """Fails its first two attempts, like bench.jobs.flaky (attempts counted from 1)."""
    if attempt <= 2:
        raise RuntimeError(f"baseline: attempt {attempt} fails on purpose")


HANDLERS: dict[str, Callable[[dict[str, Any], int], None]] = {"noop": _noop, "flaky": _flaky}

# drain_orm's work, by hand: one autocommit UPDATE of the payload's row (bench/jobs.py,
# ROW_TABLE), outside the claim's transaction, as the ORM handler runs it.
UPDATE_ROW = "UPDATE bench_row SET hits = hits + 1 WHERE id = %s"


def work(
    conninfo: str,
    queue: str,
    *,
    batch: int = BATCH,
    handler: Handler = "noop",
    finish: Finish = "delete",
    listen: bool = False,
    ready: multiprocessing.synchronize.Event | None = None,
    go: Connection | None = None,
    stop: multiprocessing.synchronize.Event | None = None,
) -> int:
    """The loop. Returns the number of jobs it finished (succeeded) before it ended."""
    finished_sql = DELETE_DONE if finish == "delete" else MARK_DONE
    claim = {"queue": queue, "limit": batch}
    total = 0
    with psycopg.connect(conninfo, autocommit=True) as conn:
        run = HANDLERS.get(handler) or (
            lambda payload, _attempt: conn.execute(UPDATE_ROW, [payload["row"]])
        )
        if listen:
            conn.execute(f"LISTEN {WAKE_CHANNEL}")
        if ready is not None:
            ready.set()
        if go is not None:
            go.poll(None)  # until the other end closes: nothing is ever sent
        done: list[int] = []
        failed: list[int] = []
        while stop is None or not stop.is_set():
            with conn.transaction():
                if done:
                    conn.execute(finished_sql, [done])
                if failed:
                    conn.execute(PUT_BACK, [failed])
                rows = conn.execute(CLAIM, claim).fetchall()
            total += len(done)
            flushed = bool(done or failed)
            done, failed = [], []
            for job_id, payload, attempt in rows:
                try:
                    run(payload, attempt + 1)
                except Exception:
                    failed.append(job_id)
                else:
                    done.append(job_id)
            if rows or flushed:
                continue
            if not listen:
                break  # drain mode: nothing left to claim
            # Notifications that arrived during the claim are kept by psycopg (backlog).
            for _ in conn.notifies(timeout=0.2, stop_after=1):
                pass
    return total


def _entry(conninfo: str, queue: str, options: dict[str, Any]) -> None:
    work(conninfo, queue, **options)


@dataclass
class Loops:
    """Baseline loop processes, started and ready, waiting for `go()`."""

    processes: list[BaseProcess]
    go_pipe: Connection  # the write end: closing it is the go
    stop_event: multiprocessing.synchronize.Event
    pids: list[int] = field(default_factory=list)

    def go(self) -> None:
        self.go_pipe.close()

    def alive(self) -> int:
        return sum(p.is_alive() for p in self.processes)

    def join(self, timeout: float) -> bool:
        """Wait for every process to end by itself (drain mode); False on timeout."""
        for proc in self.processes:
            proc.join(timeout)
        return not self.alive()

    def stop(self, timeout: float = 10.0) -> None:
        """End the processes: ask, then terminate whatever is left (by pid, our own)."""
        self.stop_event.set()  # never waited on: is_set() only
        self.go_pipe.close()
        for proc in self.processes:
            proc.join(timeout)
        for proc in self.processes:
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout)
            if proc.is_alive():
                proc.kill()
                proc.join()


def start(
    conninfo: str,
    queue: str,
    processes: int,
    *,
    handler: Handler = "noop",
    finish: Finish = "delete",
    listen: bool = False,
    batch: int = BATCH,
    ready_timeout: float = 60.0,
) -> Loops:
    """Start `processes` loops and wait until each is connected and waiting for go()."""
    ctx = multiprocessing.get_context("spawn")
    go, go_pipe = ctx.Pipe(duplex=False)
    stop = ctx.Event()
    readies = [ctx.Event() for _ in range(processes)]
    procs: list[BaseProcess] = []
    loops = Loops(procs, go_pipe, stop)
    try:
        for ready in readies:
            options = {
                "batch": batch,
                "handler": handler,
                "finish": finish,
                "listen": listen,
                "ready": ready,
                "go": go,
                "stop": stop,
            }
            started = ctx.Process(
                target=_entry, args=(conninfo, queue, options), name="bench-baseline-loop"
            )
            started.start()
            procs.append(started)
        for ready, proc in zip(readies, procs, strict=True):
            if not ready.wait(ready_timeout):
                raise RuntimeError(
                    f"baseline loop (pid {proc.pid}) not ready after {ready_timeout}s "
                    f"(exit code {proc.exitcode})"
                )
    except BaseException:
        loops.stop()
        raise
    loops.pids = [p.pid for p in procs if p.pid is not None]
    return loops
