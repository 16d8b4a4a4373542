"""What the worker scenarios share: runworker subprocesses, queue settings, waiting, timing.

Our side: `fleet()` starts `manage.py runworker` against the benchmark database
(DATABASE_URL, JOBSITE_JOB_MODULES=bench.jobs) and waits until every worker process has
registered (queue_engine_workerprocess) and its listener has run LISTEN, then primes the
planner statistics with an untimed drain (see PRIME_N). A scenario starts its workers
once and they serve all its timed runs (starting a fleet takes seconds; under load,
tens). Each timed run (`ours_timed`) pauses the queue, fills it, ANALYZEs the live
tables, un-pauses it with a `resume` control notification (as the
console does) and times until the jobs are in the history table, polling every 20 ms on
a connection of its own.

The baseline's side (`baseline_timed`) fills its table, starts bench/worker_baseline.py's
loops, ANALYZEs its table, lets them go and times until the table is empty, polled the
same way.

Every worker started here is stopped (SIGTERM, then SIGKILL of its own process group)
when `fleet()`'s block ends, whatever happened inside it.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import psycopg

from bench import baseline, worker_baseline
from bench.baseline import TABLE
from bench.deadline import process_groups
from bench.harness import BenchEnv, Timed, log, timer
from bench.jobs import ASYNC_KIND, KIND, QUEUE, sample_payloads

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 200
POLL = 0.02  # seconds between completion polls
TIMEOUT = 180.0  # seconds a timed run may take before it is called stuck
START_TIMEOUT = 90.0  # seconds for workers to register and listen (a busy machine is slow)
RESUME = json.dumps({"action": "resume"})

COUNT_RECORDS = "SELECT count(*) FROM queue_engine_jobrecord"
COUNT_SUCCEEDED = "SELECT count(*) FROM queue_engine_jobrecord WHERE state = 'succeeded'"
COUNT_BASELINE_LEFT = f"SELECT count(*) FROM {TABLE}"
FLOW_TABLES = (
    "queue_engine_flow",
    "queue_engine_flowedge",
    "queue_engine_flowcountdown",
    "queue_engine_flowrelease",
)
# Planner statistics like those of a system that has run before (autovacuum's), so that
# figures do not depend on when autovacuum gets round to the fresh benchmark database:
# `fleet()` primes them with an untimed drain of PRIME_N jobs (TRUNCATE keeps column
# statistics), and each timed run analyzes the live tables after filling them. Without
# history statistics, sql.CLAIM's parent-outputs subquery can scan every succeeded
# history row for each claimed flow node.
PRIME_N = 5_000
STATS_NOTE = "; planner statistics primed by an untimed drain, live tables analyzed after each fill"
ANALYZE_HISTORY = "ANALYZE queue_engine_jobrecord"
ANALYZE_LIVE = "ANALYZE queue_engine_job, queue_engine_flowedge"


# --- our workers ---------------------------------------------------------------------


def database_url(via_port: int | None = None) -> str:
    """A DATABASE_URL for the benchmark database (Django's settings, the name swapped);
    with `via_port`, through 127.0.0.1 at that port (a bench.relay)."""
    from django.db import connection

    s = connection.settings_dict
    user = quote(s.get("USER") or "")
    password = f":{quote(s['PASSWORD'])}" if s.get("PASSWORD") else ""
    host = s.get("HOST") or ""
    if via_port is not None:
        s = {**s, "HOST": "127.0.0.1", "PORT": via_port}
        host = "127.0.0.1"
    query: dict[str, Any] = {
        k: v
        for k, v in (s.get("OPTIONS") or {}).items()
        if isinstance(v, str | int) and not isinstance(v, bool)
    }
    if host.startswith("/"):
        query["host"] = host
        host = ""
    port = f":{s['PORT']}" if s.get("PORT") else ""
    suffix = f"?{urlencode(query)}" if query else ""
    return f"postgresql://{user}{password}@{host}{port}/{quote(s['NAME'])}{suffix}"


@dataclass
class Fleet:
    """One `manage.py runworker` command (with --processes N, a supervisor and N workers)."""

    env: BenchEnv
    queues: str
    processes: int = 1
    concurrency: int = CONCURRENCY
    database_url: str | None = None  # default: database_url(), straight to the server
    extra_env: dict[str, str] | None = None  # on top of the environment below
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    def start(self) -> None:
        with self.env.connect() as conn:
            conn.execute("DELETE FROM queue_engine_workerprocess")  # leftovers of a killed run
        fd, name = tempfile.mkstemp(prefix="bench-runworker-", suffix=".log")
        self.log_path = Path(name)
        argv = [
            sys.executable,
            "manage.py",
            "runworker",
            "--queues",
            self.queues,
            "--concurrency",
            str(self.concurrency),
            *(["--processes", str(self.processes)] if self.processes > 1 else []),
        ]
        child_env = {
            **os.environ,
            "DATABASE_URL": self.database_url or database_url(),
            "JOBSITE_JOB_MODULES": "bench.jobs",
            "DJANGO_SETTINGS_MODULE": "jobsite.settings",
            "PYTHONUNBUFFERED": "1",
            **(self.extra_env or {}),
        }
        with os.fdopen(fd, "wb") as out:
            # A session of its own: stop() can kill the supervisor and its workers as one group.
            self.proc = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=child_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process_groups.add(self.proc.pid)  # for the deadline's last resort

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Until every worker has registered and its listener has run LISTEN qe_control."""
        deadline = time.monotonic() + timeout
        with self.env.connect() as conn:
            while True:
                self.check_alive()
                registered = _count(conn, "SELECT count(*) FROM queue_engine_workerprocess")
                listening = _count(
                    conn,
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND application_name = 'queue_engine listener' "
                    "AND query = 'LISTEN qe_control'",
                )
                if registered >= self.processes and listening >= self.processes:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"runworker not ready after {timeout}s ({registered} registered, "
                        f"{listening} listening of {self.processes}){self.tail()}"
                    )
                time.sleep(0.05)

    def worker_pids(self) -> list[int]:
        with self.env.connect() as conn:
            rows = conn.execute("SELECT pid FROM queue_engine_workerprocess ORDER BY pid")
            return [int(r[0]) for r in rows.fetchall()]

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"runworker exited with {self.proc.returncode}{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return "\n--- runworker output (last lines):\n" + "\n".join(text)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a clean stop), then SIGKILL the process group if it lingers."""
        proc = self.proc
        if proc is None:
            return
        try:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    log(f"runworker (pid {proc.pid}) ignored SIGTERM for {timeout}s: killing it")
        finally:
            # Even when the wait was cut short (a deadline, an interrupt). Workers of a
            # supervisor that died first are in the same process group.
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            process_groups.discard(proc.pid)
            self.proc = None
            if self.log_path is not None:
                self.log_path.unlink(missing_ok=True)


@contextmanager
def fleet(
    env: BenchEnv,
    queue: str,
    processes: int = 1,
    concurrency: int = CONCURRENCY,
    url: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> Iterator[Fleet]:
    """Workers started and ready (registered, listening); always stopped on the way out.
    `url`: the DATABASE_URL they connect with (default: straight to the server);
    `extra_env`: more of their environment."""
    workers = Fleet(env, queue, processes, concurrency, url, extra_env)
    try:
        started = timer()
        workers.start()
        workers.wait_ready()
        log(f"runworker x{processes} ready in {started():.1f} s")
        prime(env, workers)
        yield workers
    finally:
        stopping = timer()
        workers.stop()
        log(f"runworker x{processes} stopped in {stopping():.1f} s")


@contextmanager
def extra_tables(env: BenchEnv, *tables: str) -> Iterator[None]:
    """Truncate these tables too, with the job tables, while the block runs."""
    env.extra_tables.extend(tables)
    try:
        yield
    finally:
        for table in tables:
            env.extra_tables.remove(table)


def prime(env: BenchEnv, workers: Fleet) -> None:
    """An untimed drain of PRIME_N jobs, then statistics of the history it left."""
    env.truncate()
    ours_timed(env, workers, fill_ours(PRIME_N, ASYNC_KIND, queue=workers.queues))(-1)
    with env.connect() as conn:
        conn.execute(ANALYZE_HISTORY)
    env.truncate()


# --- queue settings ----------------------------------------------------------------------


def configure_queue(
    env: BenchEnv,
    queue: str,
    *,
    paused: bool,
    max_concurrency: int | None = None,
    rate_limit: int | None = None,
    rate_window: int = 60,
    group_concurrency: int | None = None,
    rate_limit_per_key: bool = False,
) -> None:
    """Create or reset the queue's QueueConfig row (every limit as given, the rest unset)."""
    with env.connect() as conn:
        conn.execute(
            """
            INSERT INTO queue_engine_queueconfig
                   (name, paused, max_concurrency, rate_limit, rate_window, group_concurrency,
                    rate_limit_per_key)
            VALUES (%s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (name) DO UPDATE
               SET paused = EXCLUDED.paused, max_concurrency = EXCLUDED.max_concurrency,
                   rate_limit = EXCLUDED.rate_limit, rate_window = EXCLUDED.rate_window,
                   group_concurrency = EXCLUDED.group_concurrency,
                   rate_limit_per_key = EXCLUDED.rate_limit_per_key, updated_at = now()
            """,
            [
                queue,
                paused,
                max_concurrency,
                rate_limit,
                rate_window,
                group_concurrency,
                rate_limit_per_key,
            ],
        )
        conn.execute("DELETE FROM queue_engine_grouplimit WHERE queue = %s", [queue])
        conn.execute("DELETE FROM queue_engine_claimlog WHERE queue = %s", [queue])


def resume(conn: psycopg.Connection[Any], queue: str) -> None:
    """Un-pause the queue and tell the workers at once (one transaction)."""
    with conn.transaction():
        conn.execute("UPDATE queue_engine_queueconfig SET paused = false WHERE name = %s", [queue])
        conn.execute("SELECT pg_notify('qe_control', %s)", [RESUME])


# --- waiting and timing ---------------------------------------------------------------------


def _count(conn: psycopg.Connection[Any], query: str) -> int:
    row = conn.execute(query).fetchone()
    return int(row[0]) if row else 0


def wait_until(
    conn: psycopg.Connection[Any],
    query: str,
    done: Callable[[int], bool],
    *,
    what: str,
    check: Callable[[], None] | None = None,
    timeout: float = TIMEOUT,
) -> None:
    """Poll `query` (a count) every POLL seconds until `done(count)`."""
    deadline = time.monotonic() + timeout
    while True:
        count = _count(conn, query)
        if done(count):
            return
        if check is not None:
            check()
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout}s waiting for {what} (count {count})")
        time.sleep(POLL)


def ours_timed(
    env: BenchEnv,
    workers: Fleet,
    prepare: Callable[[int], int],
    *,
    count: str = COUNT_RECORDS,
    configure: Callable[[], None] | None = None,
) -> Timed:
    """A timed run of running workers: the queue is paused (and configured), `prepare(rep)`
    fills it and returns the number of history rows to wait for, the queue is un-paused,
    and the time runs from the un-pause until the history holds that many rows."""
    queue = workers.queues

    def timed(rep: int) -> float:
        if configure is not None:
            configure()
        else:
            configure_queue(env, queue, paused=True)
        phase = timer()
        n = prepare(rep)
        filled = phase()
        with env.connect() as conn:
            conn.execute(ANALYZE_LIVE)
            elapsed = timer()
            resume(conn, queue)
            try:
                wait_until(
                    conn,
                    count,
                    lambda c: c >= n,
                    what=f"{n} jobs in the history table",
                    check=workers.check_alive,
                )
            except RuntimeError as exc:
                message = str(exc)
                if "--- runworker output" not in message:
                    message += workers.tail()
                raise RuntimeError(message) from None
            seconds = elapsed()
        label = "warm-up" if rep < 0 else "ours"
        log(f"  {label} x{workers.processes}: {n} jobs in {seconds:.2f} s (fill {filled:.1f} s)")
        return seconds

    return timed


def baseline_timed(
    env: BenchEnv,
    queue: str,
    processes: int,
    prepare: Callable[[int], int],
    *,
    handler: worker_baseline.Handler = "noop",
) -> Timed:
    """A timed run of the hand-written loop: `prepare(rep)` fills the baseline table; the
    time runs from go() until the table is empty (every job finished and deleted)."""

    def timed(rep: int) -> float:
        n = prepare(rep)
        loops = worker_baseline.start(env.conninfo, queue, processes, handler=handler)
        try:
            with env.connect() as conn:
                conn.execute(f"ANALYZE {TABLE}")
                elapsed = timer()
                loops.go()
                wait_until(conn, COUNT_BASELINE_LEFT, lambda c: c == 0, what=f"{n} baseline jobs")
                seconds = elapsed()
            log(f"  baseline x{processes}: {n} jobs, run {seconds:.2f} s")
            if not loops.join(30):
                raise RuntimeError("baseline loops did not end after the table emptied")
            return seconds
        finally:
            loops.stop()

    return timed


def compare_many(env: BenchEnv, timeds: Sequence[Timed]) -> list[list[float]]:
    """`env.compare` for more than two: each run `env.repeats` times, the order rotated
    every repetition, the tables truncated before every run. Returns each one's seconds."""
    seconds: list[list[float]] = [[] for _ in timeds]
    indexed = list(enumerate(timeds))
    for rep in range(env.repeats):
        shift = rep % len(indexed)
        for index, timed in indexed[shift:] + indexed[:shift]:
            env.truncate()
            seconds[index].append(timed(rep))
    env.truncate()
    return seconds


# --- filling the queues ------------------------------------------------------------------


type Payloads = Callable[[int, str], Sequence[dict[str, Any]]]


def fill_ours(
    n: int,
    kind: str,
    *,
    groups: int = 0,
    payloads: Payloads = sample_payloads,
    queue: str = QUEUE,
) -> Callable[[int], int]:
    """Enqueue `n` jobs of `kind` into the (paused) queue in bulk, in one transaction;
    with `groups`, spread them round-robin over that many group keys."""
    from django.db import transaction

    from queue_engine.enqueueing.bulk import enqueue_many
    from queue_engine.enqueueing.prepare import JobSpec

    def prepare(rep: int) -> int:
        specs = [
            JobSpec(
                kind=kind,
                payload=payload,
                queue=queue,
                group_key=f"group-{i % groups}" if groups else None,
            )
            for i, payload in enumerate(payloads(n, f"run {rep}"))
        ]
        with transaction.atomic():
            enqueue_many(specs)
        return n

    return prepare


def fill_baseline(
    env: BenchEnv, n: int, payloads: Payloads = sample_payloads
) -> Callable[[int], int]:
    """Insert `n` jobs into the baseline table (one transaction of 1,000-row INSERTs)."""

    def prepare(rep: int) -> int:
        with env.connect() as conn:
            baseline.insert_batched(conn, QUEUE, KIND, payloads(n, f"run {rep}"))
        return n

    return prepare


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
