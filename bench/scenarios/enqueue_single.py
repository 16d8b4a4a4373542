"""One job per transaction through the real API, against one autocommit INSERT per job."""

from __future__ import annotations

from typing import Any

from bench import baseline
from bench.harness import BenchEnv, Timed, per_second, timer
from bench.jobs import KIND, QUEUE, noop, sample_payloads

NAME = "enqueue_single"
N = 2_000
WARMUP = 200
SHARE_OF_BASELINE = 0.8


def run(env: BenchEnv) -> list[dict[str, Any]]:
    ours(WARMUP)(0)
    theirs(env, WARMUP)(0)
    ours_s, base_s = env.compare(ours(N), theirs(env, N))
    rates, base_rates = per_second(N, ours_s), per_second(N, base_s)
    base = sorted(base_rates)[len(base_rates) // 2]
    return [
        env.result(
            NAME,
            unit="jobs/s",
            samples=rates,
            baseline_samples=base_rates,
            target=f">= {SHARE_OF_BASELINE:.0%} of the baseline measured in this run",
            target_value=SHARE_OF_BASELINE * base,
            n=N,
            method="noop.enqueue(to=..., subject=...) per job, Django connection in autocommit",
            baseline_method="psycopg autocommit INSERT ... RETURNING id per job, NOTIFY trigger",
        )
    ]


def ours(n: int) -> Timed:
    def timed(rep: int) -> float:
        calls = sample_payloads(n, f"single {rep}")
        elapsed = timer()
        for call in calls:
            noop.enqueue(**call)
        return elapsed()

    return timed


def theirs(env: BenchEnv, n: int) -> Timed:
    def timed(rep: int) -> float:
        calls = sample_payloads(n, f"single {rep}")
        with env.connect() as conn:
            elapsed = timer()
            baseline.insert_each(conn, QUEUE, KIND, calls)
            return elapsed()

    return timed
