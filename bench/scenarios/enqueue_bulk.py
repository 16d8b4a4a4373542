"""50,000 jobs in one enqueue_many call and one transaction (commit included), against
one transaction of 1,000-row INSERTs; then the same with a distinct dedup key per job."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from bench import baseline
from bench.harness import BenchEnv, Timed, per_second, timer
from bench.jobs import KIND, QUEUE, noop, sample_payloads
from queue_engine.enqueueing.bulk import enqueue_many
from queue_engine.enqueueing.prepare import JobSpec

NAME = "enqueue_bulk"
N = 50_000
WARMUP = 1_000
TARGET = 80_000


def run(env: BenchEnv) -> list[dict[str, Any]]:
    return [plain(env), dedup(env)]


def plain(env: BenchEnv) -> dict[str, Any]:
    ours(WARMUP)(0)
    theirs(env, WARMUP)(0)
    ours_s, base_s = env.compare(ours(N), theirs(env, N))
    return env.result(
        NAME,
        unit="jobs/s",
        samples=per_second(N, ours_s),
        baseline_samples=per_second(N, base_s),
        target=f">= {TARGET} jobs/s",
        target_value=TARGET,
        n=N,
        method="noop.enqueue_many([dict, ...]) in transaction.atomic() (the COPY path)",
        baseline_method="psycopg: one transaction of multi-row INSERTs, 1,000 rows each",
    )


def dedup(env: BenchEnv) -> dict[str, Any]:
    ours_dedup(WARMUP)(0)
    theirs_dedup(env, WARMUP)(0)
    ours_s, base_s = env.compare(ours_dedup(N), theirs_dedup(env, N))
    return env.result(
        f"{NAME}_dedup",
        unit="jobs/s",
        samples=per_second(N, ours_s),
        baseline_samples=per_second(N, base_s),
        target="none set (for information)",
        target_value=None,
        n=N,
        method="enqueue_many([JobSpec(..., dedup_key=distinct), ...]) in transaction.atomic() "
        "(the INSERT .. unnest path)",
        baseline_method="psycopg: one transaction of 1,000-row INSERT .. ON CONFLICT DO NOTHING "
        "RETURNING id",
    )


def ours(n: int) -> Timed:
    def timed(rep: int) -> float:
        calls = sample_payloads(n, f"bulk {rep}")
        elapsed = timer()
        with transaction.atomic():
            ids = noop.enqueue_many(calls)
        seconds = elapsed()
        assert len(ids) == n
        return seconds

    return timed


def theirs(env: BenchEnv, n: int) -> Timed:
    def timed(rep: int) -> float:
        calls = sample_payloads(n, f"bulk {rep}")
        with env.connect() as conn:
            elapsed = timer()
            baseline.insert_batched(conn, QUEUE, KIND, calls)
            return elapsed()

    return timed


def ours_dedup(n: int) -> Timed:
    def timed(rep: int) -> float:
        specs = [
            JobSpec(kind=KIND, payload=p, dedup_key=f"bulk-{rep}-{i}")
            for i, p in enumerate(sample_payloads(n, f"bulk {rep}"))
        ]
        elapsed = timer()
        with transaction.atomic():
            ids = enqueue_many(specs)
        seconds = elapsed()
        assert len(set(ids)) == n
        return seconds

    return timed


def theirs_dedup(env: BenchEnv, n: int) -> Timed:
    def timed(rep: int) -> float:
        calls = sample_payloads(n, f"bulk {rep}")
        keys = [f"bulk-{rep}-{i}" for i in range(n)]
        with env.connect() as conn:
            elapsed = timer()
            ids = baseline.insert_batched_dedup(conn, QUEUE, KIND, calls, keys)
            seconds = elapsed()
        assert len(ids) == n
        return seconds

    return timed
