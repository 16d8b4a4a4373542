"""Claim latency while a long transaction elsewhere pins the database's snapshot horizon.

A `REPEATABLE READ` transaction that has read something keeps VACUUM from removing any
row version it might still see: for as long as it stays open, the live table's dead
rows (two per job: the claim's update, the settle's delete) pile up under the claim,
whatever the leader's vacuum does. A report, a stuck migration or a session left idle
in a transaction does this in production.

The fleet of `steady` (2 processes, concurrency 200, async no-op kind) serves a
producer at half the same-run drain (or `--rate`) for BEFORE + PINNED + AFTER seconds;
another connection opens a `REPEATABLE READ` transaction, reads the live table, and
holds it for the PINNED seconds from BEFORE on, then rolls back. From the history, on
the database clock, by the time each job was enqueued:

- `baseline`: pickup latency p99 (started_at - created_at) before the pin (after a
  WARMUP);
- `value`: p99 while pinned; `ratio`: value / baseline (target: at most 3);
- `after`: p99 after the release; `recovered_s`: seconds from the release until every
  later WINDOW-second window's p99 is within RECOVERED of the baseline's (target: 60).

The live table's dead rows are read every second (`dead_rows`: the most, and when), to
show the pin did hold back vacuum. `--duration` sets PINNED."""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import psycopg

from bench.harness import BenchEnv, log
from bench.jobs import QUEUE
from bench.scenarios.steady import (
    BY_ENQUEUE_SECOND,
    BY_FINISH_SECOND,
    START,
    per_second_series,
    producer_rate,
)
from bench.scenarios.steady import produce as produce_steady
from bench.workers import (
    COUNT_RECORDS,
    configure_queue,
    fleet,
    wait_until,
)

NAME = "pinned_snapshot"
PROCESSES = 2
WARMUP = 5.0  # seconds not counted at the start
BEFORE = 40.0  # seconds of load before the pin
PINNED = 90.0  # seconds the snapshot is held
AFTER = 75.0  # seconds of load after the release
WINDOW = 5  # seconds per window of the recovery test
RECOVERED = 1.5  # a window's p99 within this many times the baseline's
TARGET_RATIO = 3.0
TARGET_RECOVERY = 60.0  # seconds

# Pickup latency p99 (ms) of the jobs enqueued in [a, b) seconds into the run.
P99_BETWEEN = """
SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - created_at)),
       count(*)
  FROM queue_engine_jobrecord
 WHERE created_at >= %(t0)s + make_interval(secs => %(a)s)
   AND created_at < %(t0)s + make_interval(secs => %(b)s)
"""
DEAD_ROWS = "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'queue_engine_job'"


def run(env: BenchEnv) -> list[dict[str, Any]]:
    pinned = env.duration or PINNED
    with fleet(env, QUEUE, processes=PROCESSES) as workers:
        rate, how, drain_rate = producer_rate(env, workers)
        runs = [one_run(env, rate, pinned) for _ in range(env.repeats)]
        env.truncate()
    median = statistics.median
    row = env.result(
        NAME,
        unit="ms",
        samples=[r["during"] for r in runs],
        baseline_samples=[r["before"] for r in runs],
        target=f"p99 while pinned <= {TARGET_RATIO:g}x before, back within "
        f"{TARGET_RECOVERY:g} s of the release",
        target_ratio=TARGET_RATIO,
        n=runs[0]["jobs"],
        rate=round(rate, 1),
        rate_from=how,
        drain_rate=None if drain_rate is None else round(drain_rate, 1),
        pinned_s=pinned,
        after=round(median(r["after"] for r in runs), 3),
        recovered_s=round(median(r["recovered_s"] for r in runs), 1),
        recovered_worst_s=round(max(r["recovered_s"] for r in runs), 1),
        dead_rows_max=max(r["dead_rows_max"] for r in runs),
        dead_rows_before=max(r["dead_rows_before"] for r in runs),
        method=f"steady's fleet and producer; a REPEATABLE READ transaction that read the "
        f"live table held {pinned:g} s from {BEFORE:g} s into the run; p99 of pickup latency "
        f"(started_at - created_at) by enqueue time; recovered = every later {WINDOW} s "
        f"window within {RECOVERED:g}x the before p99; medians over runs",
        series=[r["series"] for r in runs],
    )
    row["target_met"] = bool(row["target_met"]) and row["recovered_s"] <= TARGET_RECOVERY
    return [row]


def one_run(env: BenchEnv, rate: float, pinned: float) -> dict[str, Any]:
    env.truncate()
    configure_queue(env, QUEUE, paused=False)
    dead: list[tuple[float, int]] = []
    stop = threading.Event()
    holder = threading.Thread(target=pin, args=(env, BEFORE, pinned, stop), daemon=True)
    watcher = threading.Thread(target=watch_dead_rows, args=(env, dead, stop), daemon=True)
    holder.start()
    watcher.start()
    try:
        n, _lag, _ticks = produce_steady(rate, BEFORE + pinned + AFTER)
    finally:
        stop.set()
        holder.join()
        watcher.join()
    release = BEFORE + pinned
    with env.connect() as conn:
        wait_until(conn, COUNT_RECORDS, lambda c: c >= n, what=f"{n} jobs in the history table")
        t0 = conn.execute(START).fetchone()[0]  # type: ignore[index]

        def p99(a: float, b: float) -> float:
            row = conn.execute(P99_BETWEEN, {"t0": t0, "a": a, "b": b}).fetchone()
            return float(row[0] or 0.0) * 1000 if row else 0.0

        before, during, after = (
            p99(WARMUP, BEFORE),
            p99(BEFORE, release),
            p99(release, release + AFTER),
        )
        windows = [
            (a, p99(a, a + WINDOW))
            for a in range(int(release), int(release + AFTER - WINDOW + 1), WINDOW)
        ]
        recovered = AFTER  # not back within the run
        for i, (a, _) in enumerate(windows):
            if all(value <= RECOVERED * before for _, value in windows[i:]):
                recovered = a - release
                break
        series = per_second_series(
            conn.execute(BY_ENQUEUE_SECOND, {"t0": t0}).fetchall(),
            conn.execute(BY_FINISH_SECOND, {"t0": t0}).fetchall(),
        )
    before_pin = [rows for at, rows in dead if at < BEFORE]
    peak = max(dead, key=lambda d: d[1], default=(0.0, 0))
    log(
        f"  pinned_snapshot at {rate:,.0f}/s: p99 before {before:.2f} ms, pinned {during:.2f}, "
        f"after {after:.2f}; back within {recovered:.0f} s of the release; dead rows at most "
        f"{peak[1]:,} ({peak[0]:.0f} s in), {max(before_pin, default=0):,} before the pin"
    )
    return {
        "jobs": n,
        "before": before,
        "during": during,
        "after": after,
        "recovered_s": float(recovered),
        "dead_rows_max": peak[1],
        "dead_rows_before": max(before_pin, default=0),
        "series": series,
    }


def pin(env: BenchEnv, after: float, hold: float, stop: threading.Event) -> None:
    """After `after` seconds, hold a REPEATABLE READ snapshot for `hold` seconds."""
    if stop.wait(after):
        return
    with psycopg.connect(env.conninfo, application_name="bench pinned report") as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT count(*) FROM queue_engine_job").fetchone()
        stop.wait(hold)
        conn.rollback()


def watch_dead_rows(env: BenchEnv, seen: list[tuple[float, int]], stop: threading.Event) -> None:
    started = time.monotonic()
    with psycopg.connect(env.conninfo, autocommit=True) as conn:
        while not stop.wait(1.0):
            row = conn.execute(DEAD_ROWS).fetchone()
            seen.append((time.monotonic() - started, int(row[0] or 0) if row else 0))
