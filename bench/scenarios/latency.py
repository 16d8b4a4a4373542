"""Pickup latency of an idle worker, and what an idle worker costs.

One `runworker` process (async no-op kind) and one baseline loop process (LISTEN on
the baseline table's NOTIFY channel) sit idle side by side. Each run enqueues 200
jobs to each, one job per transaction at 20 per second each, interleaved (ours, then
the baseline's 25 ms later, the order swapped every run), so that both see the same
background load. Latency is enqueue-to-start from the database clock on both sides:
`started_at - created_at` of our history rows, `claimed_at - created_at` of the
baseline's rows (its claim records now()). `value` is the median over runs of each
run's p50; p95 and p99 are over every job of every run.

Then, both idle again, their CPU use over 10 s (utime + stime from /proc/<pid>/stat)
and their resident memory (VmRSS from /proc/<pid>/status).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

import psycopg

from bench import baseline, worker_baseline
from bench.baseline import TABLE
from bench.harness import BenchEnv, log, timer
from bench.jobs import KIND, QUEUE, async_noop, sample_payloads
from bench.workers import COUNT_RECORDS, configure_queue, fleet, percentile, wait_until

NAME = "latency"
N = 200
RATE = 20.0  # jobs per second, to each side
WARMUP = 10
IDLE_SECONDS = 10.0
TARGET_P50 = 3.0  # ms
TARGET_P99 = 10.0  # ms
TARGET_CPU = 1.0  # percent of one core
TARGET_RSS = 100.0  # MB

OURS_LATENCY = (
    "SELECT EXTRACT(epoch FROM started_at - created_at) * 1000 FROM queue_engine_jobrecord"
)
BASELINE_LATENCY = (
    f"SELECT EXTRACT(epoch FROM claimed_at - created_at) * 1000 FROM {TABLE} WHERE state = 'done'"
)
BASELINE_DONE = f"SELECT count(*) FROM {TABLE} WHERE state = 'done'"


def run(env: BenchEnv) -> list[dict[str, Any]]:
    configure_queue(env, QUEUE, paused=False)
    ours_runs: list[list[float]] = []
    base_runs: list[list[float]] = []
    with fleet(env, QUEUE, processes=1) as workers:
        assert workers.proc is not None
        loops = worker_baseline.start(env.conninfo, QUEUE, 1, finish="done", listen=True)
        try:
            loops.go()
            env.truncate()
            one_run(env, WARMUP, 0)  # first claims, statement preparation: not counted
            for rep in range(env.repeats):
                env.truncate()
                ours, theirs = one_run(env, N, rep)
                ours_runs.append(ours)
                base_runs.append(theirs)
            env.truncate()
            usage = idle_usage({"ours": workers.proc.pid, "baseline": loops.pids[0]})
        finally:
            loops.stop()
    ours_all = [ms for run in ours_runs for ms in run]
    base_all = [ms for run in base_runs for ms in run]
    p99 = percentile(ours_all, 99)
    cpu, rss = usage["ours"]
    base_cpu, base_rss = usage["baseline"]
    row = env.result(
        NAME,
        unit="ms",
        samples=[statistics.median(r) for r in ours_runs],
        baseline_samples=[statistics.median(r) for r in base_runs],
        target=f"p50 <= {TARGET_P50:g} ms and p99 <= {TARGET_P99:g} ms "
        f"(idle: CPU < {TARGET_CPU:g}%, RSS < {TARGET_RSS:g} MB)",
        target_value=TARGET_P50,
        n=N,
        p95=round(percentile(ours_all, 95), 3),
        p99=round(p99, 3),
        max=round(max(ours_all), 3),
        baseline_p95=round(percentile(base_all, 95), 3),
        baseline_p99=round(percentile(base_all, 99), 3),
        baseline_max=round(max(base_all), 3),
        p99_target_met=p99 <= TARGET_P99,
        idle_cpu_pct=round(cpu, 2),
        rss_mb=round(rss, 1),
        idle_cpu_target_met=cpu < TARGET_CPU,
        rss_target_met=rss < TARGET_RSS,
        baseline_idle_cpu_pct=round(base_cpu, 2),
        baseline_rss_mb=round(base_rss, 1),
        method=f"runworker --concurrency 200 (1 process, idle, async no-op kind); {N} jobs per "
        f"run, async_noop.enqueue() one per transaction at {RATE:g}/s; started_at - "
        "created_at of the history rows; p95/p99/max over all runs; idle CPU over "
        f"{IDLE_SECONDS:g} s and RSS of the worker process",
        baseline_method="psycopg loop in 1 process: LISTEN bench_wake (the table's NOTIFY "
        f"trigger), claim batches of {worker_baseline.BATCH} with claimed_at = now(), mark "
        "them done; autocommit INSERT per job, interleaved with ours; claimed_at - "
        "created_at",
    )
    row["target_met"] = row["target_met"] and p99 <= TARGET_P99
    return [row]


def one_run(env: BenchEnv, n: int, rep: int) -> tuple[list[float], list[float]]:
    """Enqueue n jobs to each side at RATE per second, interleaved; return the latencies."""
    calls = sample_payloads(n, f"latency {rep}")
    period = 1.0 / RATE
    with env.connect() as conn:

        def ours(call: dict[str, str]) -> None:
            async_noop.enqueue(**call)  # Django's connection, autocommit: one transaction

        def theirs(call: dict[str, str]) -> None:
            conn.execute(baseline.INSERT_ONE, (QUEUE, KIND, json.dumps(call)))

        first, second = (ours, theirs) if rep % 2 == 0 else (theirs, ours)
        start = time.perf_counter()
        for i, call in enumerate(calls):
            _sleep_until(start + i * period)
            first(call)
            _sleep_until(start + (i + 0.5) * period)
            second(call)
        wait_until(conn, COUNT_RECORDS, lambda c: c >= n, what=f"{n} jobs run by the worker")
        wait_until(conn, BASELINE_DONE, lambda c: c >= n, what=f"{n} jobs run by the baseline")
        return _column(conn, OURS_LATENCY), _column(conn, BASELINE_LATENCY)


def _column(conn: psycopg.Connection[Any], query: str) -> list[float]:
    return [float(row[0]) for row in conn.execute(query).fetchall()]


def _sleep_until(moment: float) -> None:
    delay = moment - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def idle_usage(
    pids: dict[str, int], seconds: float = IDLE_SECONDS
) -> dict[str, tuple[float, float]]:
    """CPU (percent of one core) over `seconds`, and RSS in MB, of each idle process."""
    before = {name: _cpu_ticks(pid) for name, pid in pids.items()}
    elapsed = timer()
    time.sleep(seconds)
    after = {name: _cpu_ticks(pid) for name, pid in pids.items()}
    wall = elapsed()
    ticks = os.sysconf("SC_CLK_TCK")
    usage = {
        name: (100.0 * (after[name] - before[name]) / ticks / wall, _rss_mb(pid))
        for name, pid in pids.items()
    }
    log("  idle: " + ", ".join(f"{k} {c:.2f}% CPU, {r:.1f} MB" for k, (c, r) in usage.items()))
    return usage


def _cpu_ticks(pid: int) -> int:
    """utime + stime of every thread of the process, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
