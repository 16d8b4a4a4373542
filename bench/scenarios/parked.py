"""What parked jobs cost (issue 43): 100,000 jobs parked on a signal, in the queue the
workers serve.

- `parked_drain`: 20,000 async no-op jobs drained by 2 worker processes with the 100,000
  parked beside them, against the same drain without them, in turn in one run (target
  >= 0.9). Then, with the fleet idle and the 100,000 still parked, the rows Postgres read
  from the live table in 10 s (pg_stat_user_tables): what waiting costs per poll.
- `signal_resume` (a scenario of its own, bench/scenarios/signal_resume.py): one idle worker; 200 jobs park on the signal "go", then each gets its
  signal, one transaction each at 20 a second: from the signal's transaction (the database
  clock, just before its commit) to the resumed attempt's start. Beside it, in the same
  run, the pickup of 200 jobs enqueued the same way (`latency`'s measure): the target is
  a p50 and a p99 within 5 ms of the pickup's.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime
from typing import Any

from bench.harness import BenchEnv, log, per_second
from bench.jobs import ASYNC_KIND, QUEUE, WAIT_KIND, async_noop, await_go, sample_payloads
from bench.workers import (
    CONCURRENCY,
    STATS_NOTE,
    configure_queue,
    fill_ours,
    fleet,
    ours_timed,
    percentile,
    wait_until,
)

NAME = "parked"
N = 20_000
PARKED = 100_000
PROCESSES = 2
SHARE = 0.9
LATENCY_N = 200
RATE = 20.0
IDLE_SECONDS = 10.0
WITHIN_MS = 5.0
FAR = datetime(9999, 12, 31, tzinfo=UTC)

LIVE_READS = (
    "SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) FROM pg_stat_user_tables "
    "WHERE relname = 'queue_engine_job'"
)
PARKED_COUNT = "SELECT count(*) FROM queue_engine_job WHERE state = 'parked'"


def park(n: int) -> None:
    """`n` jobs parked on the signal "go" (as a worker leaves them), written directly."""
    from queue_engine.models import Job

    meta = {"parked": {"signal": "go", "step": "signal:go#1", "since": "2026-01-01T00:00:00Z"}}
    Job.objects.bulk_create(
        (
            Job(kind=WAIT_KIND, queue=QUEUE, state="parked", run_at=FAR, payload=p, meta=meta)
            for p in sample_payloads(n, "parked")
        ),
        batch_size=5_000,
    )


def reads(conn: Any) -> int:
    row = conn.execute(LIVE_READS).fetchone()
    return int(row[0]) if row else 0


def run(env: BenchEnv) -> list[dict[str, Any]]:
    return drain_beside_parked(env)


def drain_beside_parked(env: BenchEnv) -> list[dict[str, Any]]:
    fill = fill_ours(N, ASYNC_KIND)

    def with_parked(rep: int) -> int:
        park(PARKED)
        return fill(rep)

    with fleet(env, QUEUE, PROCESSES) as workers:
        parked_s, plain_s = env.compare(
            ours_timed(env, workers, with_parked), ours_timed(env, workers, fill)
        )
        env.truncate()
        park(PARKED)
        configure_queue(env, QUEUE, paused=False)
        with env.connect() as conn:
            time.sleep(2.0)  # the statistics of what came before reach pg_stat
            before = reads(conn)
            time.sleep(IDLE_SECONDS)
            after = reads(conn)
        idle_reads = (after - before) / IDLE_SECONDS
        env.truncate()
    log(f"  idle with {PARKED:,} parked: {idle_reads:.1f} live-table rows read a second")
    return [
        env.result(
            "parked_drain",
            unit="jobs/s",
            samples=per_second(N, parked_s),
            baseline_samples=per_second(N, plain_s),
            target=f">= {SHARE} of the same drain without parked jobs, same run",
            target_ratio=SHARE,
            n=N,
            parked=PARKED,
            idle_live_rows_read_per_s=round(idle_reads, 1),
            processes=PROCESSES,
            method=f"runworker --concurrency {CONCURRENCY} --processes {PROCESSES}, async "
            f"no-op handler, {N:,} jobs with {PARKED:,} parked jobs of the same queue beside "
            "them; then the fleet idle for 10 s with them parked: rows read from the live "
            "table a second (pg_stat_user_tables)" + STATS_NOTE,
            baseline_method="the same drain, by the same fleet, with no parked job",
        )
    ]


def signal_resume(env: BenchEnv) -> dict[str, Any]:
    from django.db import connection, transaction

    from queue_engine import send_signal

    configure_queue(env, QUEUE, paused=False)
    pickups: list[float] = []
    resumes: list[float] = []
    with fleet(env, QUEUE, processes=1) as workers, env.connect() as conn:
        env.truncate()
        for i in range(LATENCY_N):
            async_noop.enqueue(to=f"user{i}@example.com")
            time.sleep(1 / RATE)
        wait_until(conn, "SELECT count(*) FROM queue_engine_jobrecord", lambda c: c >= LATENCY_N,
                   what="the pickups", check=workers.check_alive)  # fmt: skip
        pickups = [
            float(row[0])
            for row in conn.execute(
                "SELECT EXTRACT(epoch FROM started_at - created_at) * 1000 "
                "FROM queue_engine_jobrecord"
            )
        ]
        env.truncate()
        ids = [await_go.enqueue(to=f"user{i}@example.com").id for i in range(LATENCY_N)]
        wait_until(conn, PARKED_COUNT, lambda c: c >= LATENCY_N, what="the jobs parked",
                   check=workers.check_alive)  # fmt: skip
        sent: dict[int, datetime] = {}
        for job_id in ids:
            with transaction.atomic(), connection.cursor() as cursor:
                send_signal(job_id, "go")
                cursor.execute("SELECT clock_timestamp()")
                sent[job_id] = cursor.fetchone()[0]
            time.sleep(1 / RATE)
        wait_until(conn, "SELECT count(*) FROM queue_engine_jobrecord", lambda c: c >= LATENCY_N,
                   what="the resumed jobs", check=workers.check_alive)  # fmt: skip
        for job_id, started in conn.execute(
            "SELECT id, started_at FROM queue_engine_jobrecord WHERE id = ANY(%s)", [ids]
        ):
            resumes.append((started - sent[job_id]).total_seconds() * 1000)
        env.truncate()
    p50, p99 = statistics.median(resumes), percentile(resumes, 99)
    base50, base99 = statistics.median(pickups), percentile(pickups, 99)
    log(f"  signal to resume p50 {p50:.2f} p99 {p99:.2f} ms; pickup p50 {base50:.2f} "
        f"p99 {base99:.2f} ms")  # fmt: skip
    return env.result(
        "signal_resume",
        unit="ms",
        samples=resumes,
        baseline_samples=pickups,
        higher_is_better=False,
        target=f"p50 and p99 within {WITHIN_MS} ms of the pickup's, same run",
        target_value=base50 + WITHIN_MS,
        n=LATENCY_N,
        p99=round(p99, 2),
        pickup_p99=round(base99, 2),
        p99_met=p99 <= base99 + WITHIN_MS,
        method=f"one runworker, idle; {LATENCY_N} jobs parked on ctx.await_for_signal('go'), "
        f"then signalled one transaction each at {RATE:.0f}/s: from the database clock just "
        "before the signal's commit to the resumed attempt's started_at",
        baseline_method=f"the same worker's pickup of {LATENCY_N} jobs enqueued one transaction "
        f"each at {RATE:.0f}/s (started_at - created_at), as `latency` measures it",
    )
