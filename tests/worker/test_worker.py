"""runworker against a real Postgres, as subprocesses: what users see happen to jobs."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import psycopg
import pytest
from django.core.exceptions import SynchronousOnlyOperation
from django.db import connection
from django.utils import timezone

from queue_engine import ops, sql
from queue_engine.models import Job, JobLog, JobRecord, QueueConfig, WorkerProcess
from tests.support import jobs
from tests.support.workers import Workers, ended, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def side_tables(transactional_db: None) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_executions, test_effects")
        cursor.execute("CREATE TABLE test_executions (job_id bigint, attempt int, pid int)")
        cursor.execute("CREATE TABLE test_effects (key text PRIMARY KEY, job_id bigint)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_executions, test_effects")


def test_burst_runs_everything_then_exits_zero(workers: Workers) -> None:
    ids = jobs.add.enqueue_many([{"a": i, "b": 1} for i in range(30)])
    scheduled = jobs.add.using(delay=3600).enqueue(a=0, b=0)

    result = workers.run_burst("--concurrency", "8")

    assert result.returncode == 0, result.stderr
    results = dict(JobRecord.objects.filter(pk__in=ids).values_list("id", "result"))
    assert [results[i] for i in ids] == [i + 1 for i in range(30)]
    assert JobRecord.objects.filter(pk__in=ids, state="succeeded").count() == 30
    assert Job.objects.get(pk=scheduled.id).state == "scheduled"
    assert not WorkerProcess.objects.exists()


def test_async_and_sync_handlers_record_timings(workers: Workers) -> None:
    a = jobs.async_echo.enqueue("hello")
    s = jobs.add.enqueue(a=2, b=2)

    workers.run_burst()

    for job_id, expected in ((a.id, "hello"), (s.id, 4)):
        rec = JobRecord.objects.get(pk=job_id)
        assert (rec.state, rec.result, rec.attempt) == ("succeeded", expected, 1)
        assert rec.started_at is not None and rec.finished_at is not None
        assert rec.created_at <= rec.started_at <= rec.finished_at
        assert rec.worker


def test_an_async_handler_uses_the_async_orm_and_a_direct_call_fails_as_in_production(
    workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the browser tests set it for Playwright: the worker must not inherit it.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    direct = jobs.async_orm.enqueue(direct=True)
    awaited = jobs.async_orm.enqueue(direct=False)

    workers.run_burst()

    failed = JobRecord.objects.get(pk=direct.id)
    assert failed.state == "failed"
    assert failed.errors[-1]["class"] == "django.core.exceptions.SynchronousOnlyOperation"
    counted = JobRecord.objects.get(pk=awaited.id)
    assert (counted.state, counted.result) == ("succeeded", 1)


async def test_orm_calls_from_an_async_test_are_refused_as_in_production() -> None:
    with pytest.raises(SynchronousOnlyOperation):
        JobRecord.objects.count()


def test_flaky_job_retries_with_backoff_then_succeeds(workers: Workers) -> None:
    job = jobs.flaky.enqueue(succeed_on=3)
    workers.start()

    rec = ended(job.id, 15)

    assert (rec.state, rec.result, rec.attempt) == ("succeeded", "ok on 3", 3)
    assert [e["attempt"] for e in rec.errors] == [1, 2]
    assert rec.errors[0]["class"] == "builtins.ConnectionError"
    assert "attempt 1 failed" in rec.errors[0]["traceback"]


def test_exhausted_attempts_go_to_the_dead_letter_with_every_error(workers: Workers) -> None:
    job = jobs.always_fails.enqueue()
    workers.start()

    rec = ended(job.id, 15)

    assert (rec.state, rec.attempt) == ("failed", 3)
    assert [e["attempt"] for e in rec.errors] == [1, 2, 3]
    assert all(e["message"] == "this never works" and e["worker"] for e in rec.errors)


@pytest.mark.parametrize("definition", [jobs.fatal, jobs.fatal_by_default])
def test_fatal_errors_skip_the_remaining_attempts(workers: Workers, definition) -> None:  # type: ignore[no-untyped-def]
    job = definition.enqueue()
    workers.start()

    rec = ended(job.id, 15)

    assert (rec.state, rec.attempt, len(rec.errors)) == ("failed", 1, 1)


def test_the_enqueue_statements_stay_in_psycopgs_query_cache() -> None:
    """A statement longer than psycopg caches is parsed again on every execute. (INSERT_JOB
    runs numbered on a RawCursor, the worker's statements as EXECUTE of prepared ones.)"""
    from psycopg import _queries

    assert sql.CACHEABLE_BYTES == _queries.MAX_CACHED_STATEMENT_LENGTH
    for name in ("INSERT_JOB_DEDUP", "UPSERT_JOB_DEBOUNCED"):
        assert len(getattr(sql, name).encode()) <= sql.CACHEABLE_BYTES, name


def test_results_keep_every_character(workers: Workers) -> None:
    awkward = 'quote " backslash \\ {braces,comma} NULL \\N tab\t line\n é ✓'
    jobs_ = [jobs.async_echo.enqueue(awkward), jobs.async_echo.enqueue("NULL")]

    workers.run_burst()

    assert [JobRecord.objects.get(pk=j.id).result for j in jobs_] == [awkward, "NULL"]


def test_retry_with_delay_waits_on_the_database_clock(workers: Workers) -> None:
    job = jobs.retry_later.enqueue(delay=1.5)
    workers.start()

    rec = ended(job.id, 15)

    assert (rec.state, rec.result) == ("succeeded", 2)
    assert rec.started_at is not None and rec.finished_at is not None
    assert (rec.finished_at - rec.started_at).total_seconds() < 1
    assert (rec.started_at - rec.created_at).total_seconds() >= 1.4


def test_a_retry_delay_too_long_to_store_waits_ten_years_and_spoils_no_other_settle(
    workers: Workers,
) -> None:
    late = jobs.retry_later.enqueue(delay=1e15)
    others = [jobs.noop.enqueue() for _ in range(5)]

    workers.run_burst()

    waiting = Job.objects.get(pk=late.id)
    assert waiting.state == "scheduled" and waiting.attempt == 1
    years = (waiting.run_at - timezone.now()).days / 365.25
    assert 9.9 < years < 10.1
    assert {r.state for r in JobRecord.objects.filter(pk__in=[j.id for j in others])} == {
        "succeeded"
    }


def test_snooze_reschedules_without_burning_attempts_and_updates_payload(
    workers: Workers,
) -> None:
    job = jobs.snoozer.enqueue()
    workers.start()

    rec = ended(job.id, 15)

    assert (rec.state, rec.result, rec.attempt) == ("succeeded", 3, 1)
    assert rec.payload == {"cursor": 3}
    assert rec.meta["snoozed"] == 3


def test_unserialisable_return_value_fails_the_job_clearly(workers: Workers) -> None:
    job = jobs.returns_set.enqueue()
    workers.start()

    rec = ended(job.id, 15)

    assert rec.state == "failed"
    assert "return value has a set" in rec.errors[0]["message"]


def test_labels_restrict_which_worker_claims(workers: Workers) -> None:
    job = jobs.needs_gpu.enqueue()

    workers.run_burst("--labels", "cpu")
    assert Job.objects.get(pk=job.id).state == "available"

    workers.run_burst("--labels", "cpu,gpu")
    assert JobRecord.objects.get(pk=job.id).result == "gpu"


def test_print_logging_and_ctx_log_land_in_order(workers: Workers) -> None:
    sync_job = jobs.talker.enqueue()
    async_job = jobs.async_talker.enqueue()

    workers.run_burst()

    lines = list(
        JobLog.objects.filter(job_id=sync_job.id).order_by("seq").values_list("stream", "text")
    )
    assert lines == [
        ("stdout", "line one from print"),
        ("log", "tests.support.jobs: line two from logging"),
        ("log", "line three from ctx.log"),
        ("stderr", "line four to stderr"),
    ]
    async_lines = list(
        JobLog.objects.filter(job_id=async_job.id).order_by("seq").values_list("text", flat=True)
    )
    assert async_lines == ["async print", "async ctx.log", "tests.support.jobs: async logging"]


def test_progress_is_visible_while_running(workers: Workers) -> None:
    job = jobs.cooperative.enqueue(seconds=5)
    workers.start()

    live = wait_for(lambda: Job.objects.filter(pk=job.id, progress__gt=0.1).first())

    assert live.state == "running"
    assert live.progress_message.endswith("s of 5s")


def test_the_last_progress_report_outlives_a_fast_finish(workers: Workers) -> None:
    # tests.talker reports "halfway" and returns at once: the report is still
    # waiting for its periodic flush when the job settles.
    talkers = [jobs.talker.enqueue() for _ in range(20)]
    workers.run_burst("--concurrency", "4")

    ended = JobRecord.objects.filter(pk__in=[t.id for t in talkers])
    assert {(r.state, r.progress, r.progress_message) for r in ended} == {
        ("succeeded", 0.5, "halfway")
    }


def test_a_progress_report_on_a_row_held_elsewhere_is_written_when_it_is_free(
    workers: Workers, other_connection: psycopg.Connection
) -> None:
    """The flusher passes over a row another transaction holds, so that it never waits
    behind one, and writes the report with a later flush."""
    job = jobs.report_once.enqueue(before=1.0, after=6.0)
    workers.start("--queues", "slow")
    wait_for(lambda: Job.objects.filter(pk=job.id, state="running").exists())

    with other_connection.transaction():
        other_connection.execute(
            "SELECT 1 FROM queue_engine_job WHERE id = %s FOR UPDATE", [job.id]
        )
        # Proves nothing is written while the row is held: the report comes 1 s in.
        time.sleep(2.5)
        assert Job.objects.get(pk=job.id).progress is None

    live = wait_for(lambda: Job.objects.filter(pk=job.id, progress=0.5).first(), timeout=2)
    assert (live.state, live.progress_message) == ("running", "halfway")


@pytest.mark.parametrize("definition", [jobs.cooperative, jobs.async_sleeper])
def test_cancel_reaches_a_running_job_within_a_second(workers: Workers, definition) -> None:  # type: ignore[no-untyped-def]
    job = definition.enqueue(seconds=30)
    workers.start("--queues", "slow")
    wait_for(lambda: Job.objects.filter(pk=job.id, state="running").exists())
    # Not a window: stands for "the worker holds the job" (the cancel's NOTIFY finds it
    # in flight), which nothing outside the worker shows; its claim returns well within.
    time.sleep(0.3)

    ops.cancel_job(job.id, actor="alice")
    started = time.monotonic()

    # Running until its handler has stopped, then cancelled by its worker.
    rec = wait_for(
        lambda: JobRecord.objects.filter(pk=job.id).first(),
        timeout=2,
        message="the worker to stop the job and settle it",
    )
    assert time.monotonic() - started < 1.5
    assert rec.state == "cancelled" and "cancelled by alice" in rec.errors[-1]["message"]
    assert "cancelled by alice" in workers.output()
    wait_for(lambda: WorkerProcess.objects.get().in_flight == 0, timeout=8)


def test_a_cancel_whose_notify_was_missed_is_caught_by_the_heartbeat(workers: Workers) -> None:
    QueueConfig.objects.update_or_create(name="slow", defaults={"lock_duration": 3})
    job = jobs.cooperative.enqueue(seconds=30)
    workers.start("--queues", "slow")
    wait_for(lambda: Job.objects.filter(pk=job.id, state="running").exists())

    # What ops.cancel_job writes, without the NOTIFY the worker would have had.
    with connection.cursor() as cursor:
        cursor.execute(sql.OPS_REQUEST_CANCEL, {"ids": [job.id], "actor": "alice"})

    # Its next heartbeat (a second, with a 3 s lease) tells the worker to stop it.
    rec = wait_for(lambda: JobRecord.objects.filter(pk=job.id).first(), timeout=5)
    assert rec.state == "cancelled" and "cancelled by alice" in rec.errors[-1]["message"]


def test_a_live_worker_whose_registration_was_swept_registers_again(workers: Workers) -> None:
    workers.start("--queues", "slow")
    wait_for(lambda: WorkerProcess.objects.exists(), timeout=30)
    worker_id, pid = WorkerProcess.objects.values_list("id", "pid").get()

    WorkerProcess.objects.all().delete()  # what the stale sweep does to an unreachable worker

    wait_for(lambda: WorkerProcess.objects.filter(id=worker_id, pid=pid).exists(), timeout=10)
    assert "registered again" in workers.output()


def test_idle_async_job_is_cancelled_and_retried(workers: Workers) -> None:
    job = jobs.silent_async.enqueue()
    workers.start()

    wait_for(lambda: Job.objects.filter(pk=job.id, state="scheduled").exists(), timeout=10)

    live = Job.objects.get(pk=job.id)
    assert live.attempt == 1
    assert live.errors[0]["class"] == "queue_engine.exceptions.IdleTimeout"


def test_idle_sync_job_is_abandoned_and_retried_as_its_kind_retries(workers: Workers) -> None:
    job = jobs.silent_sync.enqueue()
    workers.start("--concurrency", "1")
    other = jobs.add.enqueue(a=1, b=1)

    retried = wait_for(lambda: Job.objects.filter(pk=job.id, state="scheduled").first())

    assert retried.attempt == 1
    assert "IdleTimeout" in retried.errors[0]["class"]
    assert ended(other.id, 15).state == "succeeded"


def test_atomic_block_commits_effects_with_completion(workers: Workers, side_tables: None) -> None:
    job = jobs.atomic_writer.enqueue(key="k1")
    workers.start()

    rec = wait_for(lambda: JobRecord.objects.filter(pk=job.id, result__isnull=False).first())

    assert (rec.state, rec.result) == ("succeeded", "k1")
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM test_effects WHERE key = 'k1'")
        assert cursor.fetchall() == [(job.id,)]


def test_atomic_block_of_a_cancelled_job_commits_nothing(
    workers: Workers, side_tables: None
) -> None:
    job = jobs.atomic_writer.enqueue(key="k2", stall=1.5)
    workers.start()
    wait_for(lambda: Job.objects.filter(pk=job.id, state="running").exists())

    ops.cancel_job(job.id, actor="test")
    # A plain function cannot be stopped: it is recorded once it has returned, past its
    # atomic block, which the cancel made refuse.
    wait_for(lambda: JobRecord.objects.filter(pk=job.id, state="cancelled").exists(), timeout=5)

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM test_effects")
        assert cursor.fetchone() == (0,)


def test_a_long_atomic_block_does_not_cost_the_other_jobs_their_leases(
    workers: Workers,
) -> None:
    """A handler's transaction holds its job row for longer than a lease: the worker's
    heartbeat renews its other jobs meanwhile instead of waiting for that row."""
    QueueConfig.objects.create(name="slow", lock_duration=3)  # a beat each second
    hold = jobs.atomic_hold.enqueue(seconds=8)
    other = jobs.cooperative.enqueue(seconds=8)
    workers.start("--queues", "slow", "--concurrency", "2")
    wait_for(lambda: Job.objects.filter(state="running").count() == 2)

    # The block's commit moves the job to history; the result the handler returns after
    # it follows in the next settle, a moment later.
    held, ran = (
        wait_for(lambda: JobRecord.objects.filter(pk=hold.id, result__isnull=False).first()),
        wait_for(lambda: JobRecord.objects.filter(pk=other.id).first(), timeout=20),
    )

    assert (held.state, held.result, held.attempt) == ("succeeded", "held", 1)
    assert (ran.state, ran.result, ran.attempt, ran.rescues) == ("succeeded", "finished", 1, 0)
    assert "lease lost" not in workers.output()


def test_sigterm_lets_short_jobs_finish_and_releases_long_ones(workers: Workers) -> None:
    long_job = jobs.async_sleeper.enqueue(seconds=60)
    short_job = jobs.cooperative.enqueue(seconds=1)
    proc = workers.start("--queues", "slow", "--shutdown-timeout", "2.5")
    wait_for(lambda: Job.objects.filter(state="running").count() == 2)

    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "no more claims" in workers.output(), message="the worker to stop claiming")
    late = jobs.async_sleeper.enqueue(seconds=0)

    assert proc.wait(10) == 0
    assert JobRecord.objects.get(pk=short_job.id).result == "finished"
    released = Job.objects.get(pk=long_job.id)
    assert (released.state, released.attempt, released.lease_owner) == ("available", 0, None)
    assert Job.objects.get(pk=late.id).state == "available"
    assert not WorkerProcess.objects.exists()


def test_second_signal_aborts_at_once(workers: Workers) -> None:
    job = jobs.async_sleeper.enqueue(seconds=60)
    proc = workers.start("--queues", "slow", "--shutdown-timeout", "60")
    wait_for(lambda: Job.objects.filter(pk=job.id, state="running").exists())

    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "stopping: no more claims" in workers.output(), timeout=5)
    proc.send_signal(signal.SIGTERM)

    assert proc.wait(5) == 1
    assert Job.objects.get(pk=job.id).state == "running"  # comes back after its lease


def test_killed_worker_jobs_come_back_after_the_lease(workers: Workers, side_tables: None) -> None:
    QueueConfig.objects.update_or_create(name="record", defaults={"lock_duration": 2})
    job = jobs.record.enqueue(pause=30)
    victim = workers.start("--queues", "record")
    wait_for(lambda: Job.objects.filter(pk=job.id, state="running").exists())

    victim.kill()
    victim.wait()
    workers.start("--queues", "record")
    Job.objects.filter(pk=job.id).update(payload={"pause": 0})

    rec = ended(job.id, 15)
    assert (rec.state, rec.attempt, rec.result) == ("succeeded", 2, 2)
    assert rec.errors[0]["class"] == "queue_engine.LeaseExpired"
    assert rec.rescues == 1


@pytest.mark.once
def test_poison_job_that_kills_its_worker_is_dead_lettered(workers: Workers) -> None:
    QueueConfig.objects.update_or_create(name="poison", defaults={"lock_duration": 1})
    job = jobs.poison.enqueue()
    env: dict[str, str] = {}
    restarted = 0
    workers.start("--queues", "poison")

    def ended_restarting_the_dead_worker() -> bool:
        nonlocal restarted
        if JobRecord.objects.filter(pk=job.id).exists():
            return True
        if all(p.poll() is not None for p in workers.procs):
            restarted += 1
            workers.start("--queues", "poison", env=env)
        return False

    wait_for(ended_restarting_the_dead_worker, timeout=40, interval=0.2, message="the poison job")

    rec = JobRecord.objects.get(pk=job.id)
    assert rec.state == "failed"
    assert rec.rescues == 5 and restarted >= 4


@pytest.mark.once
def test_jobs_claimed_with_a_poison_job_succeed_and_only_it_is_dead_lettered(
    workers: Workers,
) -> None:
    QueueConfig.objects.update_or_create(name="poison", defaults={"lock_duration": 5})
    poison = jobs.poison.enqueue()
    innocent = [jobs.beside_poison.enqueue().id for _ in range(3)]
    args = ("--queues", "poison", "--concurrency", "4")
    workers.start(*args)

    def all_ended_restarting_the_dead_worker() -> bool:
        if JobRecord.objects.filter(pk__in=[poison.id, *innocent]).count() == 4:
            return True
        if all(p.poll() is not None for p in workers.procs):
            workers.start(*args)
        return False

    wait_for(all_ended_restarting_the_dead_worker, timeout=150, interval=0.2, message="the jobs")

    dead = JobRecord.objects.get(pk=poison.id)
    assert (dead.state, dead.rescues) == ("failed", 5)
    ended = JobRecord.objects.filter(pk__in=innocent)
    assert {(r.id, r.state, r.result) for r in ended} == {
        (i, "succeeded", "done") for i in innocent
    }
    assert max(r.rescues for r in ended) <= 2  # suspects run alone after two rescues


def test_supervisor_runs_n_processes_and_restarts_a_dead_one(workers: Workers) -> None:
    workers.start("--processes", "2", "--worker-id", "fleet")
    wait_for(lambda: WorkerProcess.objects.count() == 2, timeout=40)
    victim = WorkerProcess.objects.get(id="fleet-0")

    import os

    os.kill(victim.pid, signal.SIGKILL)

    wait_for(
        lambda: WorkerProcess.objects.filter(id="fleet-0").exclude(pid=victim.pid).exists(),
        timeout=15,
        message="worker 0 to come back",
    )
    ids = jobs.add.enqueue_many([{"a": i, "b": 0} for i in range(20)])
    wait_for(lambda: JobRecord.objects.filter(pk__in=ids).count() == 20, timeout=15)
