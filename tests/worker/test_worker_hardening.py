"""What one bad value, a silent thread or a shutdown must never do to a worker's jobs.

Real runworker subprocesses against the test database. Where Postgres must refuse a
value that the engine makes storable, a trigger of the test's own makes it refuse: the
refusal is Postgres's, the engine sees it as it would any other.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from queue_engine import sql
from queue_engine.models import Job, JobLog, JobRecord, QueueConfig
from queue_engine.worker.options import WorkerOptions
from queue_engine.worker.round_trip import RoundTrip, claim_request
from queue_engine.worker.settle import SettleBatch
from queue_engine.worker.weights import QueueWeights
from tests.support import jobs
from tests.support.history import clock_now
from tests.support.slow_connections import SlowConnections
from tests.support.workers import Workers, ended, listening, wait_for

pytestmark = pytest.mark.slow


def log_texts(job_id: int) -> list[str]:
    return list(JobLog.objects.filter(job_id=job_id).order_by("seq").values_list("text", flat=True))


@pytest.fixture
def refusing_triggers(transactional_db: None) -> Iterator[None]:
    """Postgres refuses (SQLSTATE 22023) a result "refuse-me" and a log line "refuse-me"."""
    with connection.cursor() as cursor:
        for table, refused in (
            ("queue_engine_jobrecord", "NEW.result = '\"refuse-me\"'::jsonb"),
            ("queue_engine_joblog", "NEW.text = 'refuse-me'"),
        ):
            cursor.execute(
                f"""
                CREATE FUNCTION test_refuse_{table}() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF {refused} THEN
                        RAISE EXCEPTION 'the test refuses this row' USING ERRCODE = '22023';
                    END IF;
                    RETURN NEW;
                END $$;
                CREATE TRIGGER test_refuse BEFORE INSERT ON {table}
                    FOR EACH ROW EXECUTE FUNCTION test_refuse_{table}();
                """
            )
    yield
    with connection.cursor() as cursor:
        for table in ("queue_engine_jobrecord", "queue_engine_joblog"):
            cursor.execute(f"DROP TRIGGER test_refuse ON {table}")
            cursor.execute(f"DROP FUNCTION test_refuse_{table}()")


# --- one bad value never sinks its batch -------------------------------------------------


def test_a_nul_in_an_error_or_a_print_sinks_nothing_else_in_its_batch(workers: Workers) -> None:
    payloads: list[dict[str, Any]] = [{"value": f"v{i}"} for i in range(50)]
    payloads[10] = {"what": "raise_nul"}
    payloads[20] = {"what": "print_nul", "value": "printed"}
    ids = jobs.unstorable.enqueue_many(payloads)

    workers.start("--queues", "unstorable", "--concurrency", "50")
    records = {job_id: ended(job_id, 20) for job_id in ids}

    bad = records[ids[10]]
    assert bad.state == "failed"
    assert bad.errors[-1]["class"] == "builtins.ValueError"
    assert bad.errors[-1]["message"] == "bad\\x00byte"
    assert "bad\\x00byte" in bad.errors[-1]["traceback"]
    others = [r for job_id, r in records.items() if job_id != ids[10]]
    assert [r.state for r in others] == ["succeeded"] * 49
    assert records[ids[20]].result == "printed"
    wait_for(lambda: log_texts(ids[20]) == ["a\\x00b"], message="the printed line")


def test_a_lone_surrogate_and_a_nul_in_progress_are_stored_readably(workers: Workers) -> None:
    surrogate = jobs.unstorable.enqueue(what="raise_surrogate")
    progress = jobs.unstorable.enqueue(what="progress_nul", value="reported")

    workers.start("--queues", "unstorable")

    error = ended(surrogate.id, 20).errors[-1]
    assert (error["class"], error["message"]) == ("builtins.ValueError", "bad\\ud800half")
    done = ended(progress.id, 20)
    assert (done.state, done.result, done.progress_message) == (
        "succeeded",
        "reported",
        "half\\x00way",
    )


def test_an_outcome_postgres_refuses_dead_letters_that_job_alone(
    workers: Workers, refusing_triggers: None
) -> None:
    values = [f"v{i}" for i in range(30)]
    values[7] = "refuse-me"
    ids = jobs.unstorable.enqueue_many([{"value": v} for v in values])

    workers.start("--queues", "unstorable", "--concurrency", "30")
    records = {job_id: ended(job_id, 20) for job_id in ids}

    refused = records[ids[7]]
    assert refused.state == "failed"
    assert refused.errors[-1]["class"] == "queue_engine.OutcomeRefused"
    assert "22023" in refused.errors[-1]["message"]
    assert "the test refuses this row" in refused.errors[-1]["message"]
    assert [r.state for job_id, r in records.items() if job_id != ids[7]] == ["succeeded"] * 29
    assert "settling them one by one" in workers.output()


def test_a_log_line_postgres_refuses_leaves_the_other_lines_of_its_batch(
    workers: Workers, refusing_triggers: None
) -> None:
    job = jobs.unstorable.enqueue(what="print_lines", lines=["first", "refuse-me", "last"])

    workers.start("--queues", "unstorable")
    ended(job.id, 20)

    texts = wait_for(lambda: len(log_texts(job.id)) == 3 and log_texts(job.id), timeout=10)
    assert texts[0] == "first" and texts[2] == "last"
    assert texts[1].startswith("[this line could not be stored: Postgres refused it (22023")
    assert "dropped" not in workers.output()


# --- a plain function past its idle timeout ----------------------------------------------


@pytest.fixture
def effects(transactional_db: None) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_effects")
        cursor.execute("CREATE TABLE test_effects (key text PRIMARY KEY, job_id bigint)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_effects")


def test_a_silent_plain_function_is_abandoned_and_can_no_longer_act_for_its_job(
    workers: Workers, effects: None
) -> None:
    blocked = jobs.blocked_sync.enqueue(seconds=4, key="late")
    workers.start("--queues", "blocked,math", "--concurrency", "1")
    wait_for(lambda: Job.objects.filter(pk=blocked.id, state="running").exists())
    started = time.monotonic()
    other = jobs.add.enqueue(a=1, b=2)

    dead = ended(blocked.id, 20)
    assert time.monotonic() - started < 3.5  # settled at its idle timeout, not at its return
    assert (dead.state, dead.attempt, dead.result) == ("failed", 1, None)
    assert dead.errors[-1]["class"] == "queue_engine.exceptions.IdleTimeout"
    # Its slot is free at once: the other job runs while the thread still blocks.
    assert ended(other.id, 20).result == 3
    assert time.monotonic() - started < 3.9

    wait_for(lambda: "its abandoned handler returned" in workers.output(), timeout=10)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM test_effects")
        assert cursor.fetchone()[0] == 0  # its ctx.atomic() refused
    assert JobRecord.objects.get(pk=blocked.id).result is None  # its return was dropped
    output = workers.output()
    assert output.count("idle for more than") == 1
    assert "(1 abandoned handler thread(s) in this process)" in output


def test_a_thread_that_never_returns_does_not_hold_up_shutdown(workers: Workers) -> None:
    blocked = jobs.blocked_sync.enqueue(seconds=120)
    proc = workers.start("--queues", "blocked", "--shutdown-timeout", "1")
    ended(blocked.id, 20)

    proc.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    proc.wait(timeout=10)

    assert time.monotonic() - stopped < 2.0
    assert "1 handler thread(s) still running; they end with this process" in workers.output()


# --- a shutdown gives jobs back only once their handlers can no longer run ----------------


@pytest.fixture
def spans(transactional_db: None) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_spans")
        cursor.execute(
            "CREATE TABLE test_spans (job_id bigint, attempt int, pid int, event text, "
            "at timestamptz)"
        )
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_spans")


def test_a_shutdown_never_runs_one_attempt_twice_at_once(workers: Workers, spans: None) -> None:
    QueueConfig.objects.update_or_create(name="spans", defaults={"lock_duration": 30})
    plain = [jobs.span_sync.enqueue(seconds=8) for _ in range(2)]
    cooperative = jobs.span_sync.enqueue(seconds=8, cooperative=True)
    in_async = [jobs.span_async.enqueue(seconds=8) for _ in range(2)]
    everything = [*plain, cooperative, *in_async]
    first = workers.start("--queues", "spans", "--concurrency", "5", "--shutdown-timeout", "3")
    wait_for(lambda: Job.objects.filter(state="running").count() == 5, timeout=15)
    second = workers.start("--queues", "spans", "--concurrency", "5")
    wait_for(lambda: listening(2), message="the second worker to be up, ready to claim")

    first.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    first.wait(30)
    first_gone = clock_now()
    lived = time.monotonic() - signalled

    records = {job.id: ended(job.id, timeout=30) for job in everything}
    assert lived < 3 + 1, workers.output()
    assert all(r.state == "succeeded" and r.attempt == 1 for r in records.values())
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id, attempt, pid, event, at FROM test_spans ORDER BY at")
        rows = cursor.fetchall()
    runs: dict[tuple[int, int, int], list[Any]] = {}
    for job_id, attempt, pid, event, at in rows:
        span = runs.setdefault((job_id, attempt, pid), [None, None])
        span[0 if event == "start" else 1] = at
    for job in everything:
        ran = sorted(
            (start, end or first_gone) for (j, _, pid), (start, end) in runs.items() if j == job.id
        )
        assert len(ran) == 2, ran  # once in each worker, both as attempt 1
        assert ran[0][1] <= ran[1][0], f"job {job.id} ran twice at once: {ran}"
    told = {(j, pid): end for (j, _, pid), (_, end) in runs.items() if pid == first.pid}
    assert told[(cooperative.id, first.pid)] is not None  # ctx.sleep() returned when told
    assert second.poll() is None


def test_a_worker_with_slow_connections_claims_nothing_once_it_stops(
    transactional_db: None, tmp_path: Path
) -> None:
    """Each of the worker's connections takes a second to open (a real TCP proxy that
    holds them back): a claim decided before SIGTERM may go out after it, once its
    connection is open, and must then take nothing. A job enqueued after "no more
    claims" waits for another worker."""
    long_job = jobs.async_sleeper.enqueue(seconds=60)
    short_job = jobs.cooperative.enqueue(seconds=1)
    with SlowConnections(delay=1.0) as proxy:
        workers = Workers(tmp_path, database_url=proxy.url)
        try:
            proc = workers.start("--queues", "slow", "--shutdown-timeout", "2.5")
            wait_for(lambda: Job.objects.filter(state="running").count() == 2, timeout=30)
            proc.send_signal(signal.SIGTERM)
            wait_for(lambda: "no more claims" in workers.output(), message="the worker to stop")
            late = jobs.async_sleeper.enqueue(seconds=0)
            assert proc.wait(20) == 0, workers.output()
        finally:
            workers.stop_all()

    assert JobRecord.objects.get(pk=short_job.id).result == "finished"
    assert Job.objects.get(pk=long_job.id).state == "available"
    assert Job.objects.filter(pk=late.id, state="available").exists(), workers.output()


@pytest.mark.parametrize("stopping", [False, True])
def test_a_claim_decided_before_a_stop_and_sent_after_it_takes_nothing(
    transactional_db: None, conninfo: str, stopping: bool
) -> None:
    """A lane decides its claim, then may wait for its connection (opening, or opening
    again) while the worker logs "no more claims": what it sends then claims nothing,
    and a job enqueued since stays for the other workers. Sent before, it claims."""
    job = jobs.noop.using(queue="stopping").enqueue()
    options = WorkerOptions(conninfo, queues=["stopping"])
    statement, params = claim_request(
        options,
        QueueWeights(options.queues, None),
        "a-stopping-worker",
        5,
        None,
        token=1,
        floors=dict(sql.NO_FLOORS),
        merged=False,
        counts_down=False,
    )
    trip = RoundTrip(SettleBatch(), params, statement, 5, False, [], False)
    trip.stopping = lambda: stopping

    async def send() -> list[Any]:
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
            return await trip(conn)

    rows = asyncio.run(send())

    state = Job.objects.get(pk=job.id).state
    assert ([row[0] for row in rows], state) == (
        ([], "available") if stopping else ([job.id], "running")
    )


# --- a ctx.atomic() block's result --------------------------------------------------------


def test_a_result_set_in_an_atomic_block_survives_a_kill_right_after_it(
    workers: Workers, effects: None
) -> None:
    job = jobs.atomic_then_die.enqueue(key="k1")
    proc = workers.start("--queues", "atomic")

    proc.wait(timeout=20)

    assert proc.returncode == -signal.SIGKILL
    done = ended(job.id, timeout=5)
    assert (done.state, done.result) == ("succeeded", {"key": "k1"})
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, job_id FROM test_effects")
        assert cursor.fetchall() == [("k1", job.id)]


def test_an_atomic_block_result_that_is_not_json_rolls_the_block_back(
    workers: Workers, effects: None
) -> None:
    job = jobs.atomic_result.enqueue(key="k2")
    workers.start("--queues", "atomic")

    failed = ended(job.id, 20)

    assert failed.state == "failed"
    assert "the atomic block's result has a set" in failed.errors[-1]["message"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM test_effects")
        assert cursor.fetchone()[0] == 0


# --- a scheduled job wakes the workers when its time comes --------------------------------


def test_a_delayed_job_starts_on_time_without_waiting_for_a_poll(workers: Workers) -> None:
    workers.start("--queues", "math", "--poll-interval", "30")
    wait_for(lambda: "is now the leader" in workers.output(), timeout=30)
    wait_for(listening, message="the worker to listen for wake-ups")
    job = jobs.add.using(delay=1).enqueue(a=2, b=2)

    done = ended(job.id, timeout=10)

    assert done.started_at is not None and done.run_at is not None
    assert (done.started_at - done.run_at).total_seconds() < 2  # a poll would take 30 s
