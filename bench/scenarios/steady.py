"""Pickup latency under a steady load, and stalls: what short bursts do not show.

Two worker processes (`runworker --concurrency 200 --processes 2`, async no-op kind)
serve a producer in this process that enqueues at a fixed rate for `--duration`
seconds (default DURATION): every TICK it enqueues the jobs due by then, one
`enqueue()` or one `enqueue_many()` in one transaction, as an application would.

Two loads, each run `--repeats` times:
- half the rate of the same fleet's drain (20,000 queued jobs, timed as `drain` times
  them, `--repeats` times, the median), or `--rate` when given;
- LOW_RATE jobs per second, where an idle worker's pickup should show.

Each run's figures come from the history rows, on the database clock:
- pickup latency: `started_at - created_at` of every job (p50, p95, p99, max);
- pickup latency from the enqueue's commit: `started_at` minus the moment the
  producer's transaction returned from COMMIT (the bench process's clock, the same
  machine's as Postgres's). `created_at` is the start of the statement that inserted
  the job (the column's default, `statement_timestamp()`), so the first figure also
  holds the rest of the enqueue (its COPY, its commit waiting for the WAL flush); this
  one is what the workers take once the jobs can be seen, and the difference is the
  enqueue's own time (`enqueue_p50`/`enqueue_p99`);
- the longest gap between two successive completions (`finished_at`), the stall a
  user would see as "nothing finished for that long";
- a per-second series, drawn in the HTML report: jobs enqueued, jobs completed,
  p50, p99 and max pickup latency of the jobs enqueued in that second, and the longest
  gap without a completion that ended in it. A stall shows as a spike at its time.

`value` is the median over runs of each run's p99; p50, p95 and max_gap_ms are
medians over runs too (max_gap_worst_ms is the worst run's). There is no baseline
loop: the targets are absolute (issue 24).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from bench.cpu import COLUMNS as CPU_COLUMNS
from bench.cpu import CpuSampler
from bench.deadline import Overdue
from bench.harness import BenchEnv, log, per_second, timer
from bench.jobs import ASYNC_KIND, QUEUE, async_noop
from bench.workers import (
    CONCURRENCY,
    COUNT_RECORDS,
    START_TIMEOUT,
    Fleet,
    configure_queue,
    fill_ours,
    fleet,
    ours_timed,
    wait_until,
)

NAME = "steady"
PROCESSES = 2
DURATION = 180.0  # seconds per run
DRAIN_N = 20_000
LOW_RATE = 100.0  # jobs/s
TICK = 0.01  # seconds between the producer's enqueues
TARGET_P99 = 20.0  # ms, at half the drain rate
TARGET_GAP = 100.0  # ms, at half the drain rate
TARGET_LOW_P99 = 5.0  # ms, at LOW_RATE
PAYLOAD = {"to": "user@example.com", "subject": "steady"}

# Every job's pickup latency (ms), and the run's start.
LATENCY = """
SELECT percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY ms), max(ms), count(*)
  FROM (SELECT extract(epoch FROM started_at - created_at) * 1000 AS ms
          FROM queue_engine_jobrecord) r
"""
# The longest gap between two successive completions, and when it ended (s into the run).
LONGEST_GAP = """
SELECT extract(epoch FROM gap) * 1000, extract(epoch FROM at - %(t0)s), at
  FROM (SELECT finished_at - lag(finished_at) OVER (ORDER BY finished_at) AS gap,
               finished_at AS at
          FROM (SELECT DISTINCT finished_at FROM queue_engine_jobrecord) f) g
 WHERE gap IS NOT NULL
 ORDER BY gap DESC LIMIT 1
"""
# Per second of the run: jobs enqueued and their pickup latencies.
BY_ENQUEUE_SECOND = """
SELECT s, count(*),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY ms),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY ms),
       max(ms)
  FROM (SELECT floor(extract(epoch FROM created_at - %(t0)s))::int AS s,
               extract(epoch FROM started_at - created_at) * 1000 AS ms
          FROM queue_engine_jobrecord) r
 GROUP BY s ORDER BY s
"""
# Per second of the run: completions, and the longest gap without one ending in it.
BY_FINISH_SECOND = """
SELECT floor(extract(epoch FROM at - %(t0)s))::int AS s, sum(n), max(extract(epoch FROM gap)) * 1000
  FROM (SELECT finished_at AS at, n,
               finished_at - lag(finished_at) OVER (ORDER BY finished_at) AS gap
          FROM (SELECT finished_at, count(*) AS n FROM queue_engine_jobrecord
                 GROUP BY finished_at) f) g
 GROUP BY 1 ORDER BY 1
"""
START = "SELECT min(created_at) FROM queue_engine_jobrecord"
# Each job's tick (the producer's transaction that enqueued it): the last tick whose
# first job id is at most the job's. Pickup from the commit, and the enqueue's own time.
TICKS = "CREATE TEMPORARY TABLE steady_tick (first_id bigint PRIMARY KEY, committed_at timestamptz)"
FROM_COMMIT = """
SELECT percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY pickup),
       max(pickup),
       percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY enqueue)
  FROM (SELECT extract(epoch FROM r.started_at - t.committed_at) * 1000 AS pickup,
               extract(epoch FROM t.committed_at - r.created_at) * 1000 AS enqueue
          FROM queue_engine_jobrecord r
          CROSS JOIN LATERAL (SELECT committed_at FROM steady_tick
                               WHERE first_id <= r.id
                               ORDER BY first_id DESC LIMIT 1) t) x
"""


@dataclass
class Run:
    rate: float
    jobs: int
    p50: float
    p95: float
    p99: float
    max: float
    max_gap_ms: float
    max_gap_at_s: float
    from_commit: tuple[float, float, float, float]  # p50, p95, p99, max
    enqueue: tuple[float, float]  # p50, p99 of the producer's transactions
    producer_lag_ms: float
    series: dict[str, list[Any]]
    cpu: dict[str, float | None]


def deadline(env: BenchEnv) -> float:
    """Seconds the scenario may take: starting the fleet, the drains that set the rate,
    and each run with the wait for its last jobs, with room to spare."""
    duration = env.duration or DURATION
    drains = 0 if env.rate is not None else env.repeats * 60.0
    return START_TIMEOUT + drains + 2 * env.repeats * (duration + 60.0) + 120.0


def run(env: BenchEnv) -> list[dict[str, Any]]:
    duration = env.duration or DURATION
    with fleet(env, QUEUE, processes=PROCESSES) as workers:
        rate, how, drain_rate = producer_rate(env, workers)
        rows = []
        for load, target_p99, target_gap, load_rate, load_how in (
            ("half_drain", TARGET_P99, TARGET_GAP, rate, how),
            ("low", TARGET_LOW_P99, None, LOW_RATE, "fixed"),
        ):
            runs: list[Run] = []
            try:
                for _ in range(env.repeats):
                    runs.append(one_run(env, load_rate, duration))
            except Overdue:
                if runs:  # the runs that ended: the harness marks their row partial
                    env.keep(result(env, runs, load, load_how, target_p99, target_gap, drain_rate))
                raise
            row = result(env, runs, load, load_how, target_p99, target_gap, drain_rate)
            rows.append(env.keep(row))
        env.truncate()
    return rows


def producer_rate(env: BenchEnv, workers: Fleet) -> tuple[float, str, float | None]:
    """`--rate`, or half of this fleet's drain of DRAIN_N queued jobs (the median of
    `--repeats` timings): the rate, how it was chosen, and the drain rate."""
    if env.rate is not None:
        return env.rate, "--rate", None
    seconds = []
    for rep in range(env.repeats):
        env.truncate()
        seconds.append(ours_timed(env, workers, fill_ours(DRAIN_N, ASYNC_KIND))(rep))
    drain_rate = statistics.median(per_second(DRAIN_N, seconds))
    return drain_rate / 2, f"half the same-run drain ({drain_rate:,.0f} jobs/s)", drain_rate


def one_run(env: BenchEnv, rate: float, duration: float) -> Run:
    """Produce at `rate` for `duration` seconds into the running fleet; wait for every job
    to finish; read the run's figures from the history."""
    env.truncate()
    configure_queue(env, QUEUE, paused=False)
    cpu = CpuSampler().start()
    try:
        n, lag, ticks = produce(rate, duration)
        with env.connect() as conn:
            wait_until(conn, COUNT_RECORDS, lambda c: c >= n, what=f"{n} jobs in the history table")
    finally:
        cpu.stop()
    with env.connect() as conn:
        t0 = conn.execute(START).fetchone()[0]  # type: ignore[index]
        (p50, p95, p99), worst, count = conn.execute(LATENCY).fetchone()  # type: ignore[misc]
        gap_row = conn.execute(LONGEST_GAP, {"t0": t0}).fetchone()
        gap_ms, gap_at = (float(gap_row[0]), float(gap_row[1])) if gap_row else (0.0, 0.0)
        gap_when = f"{gap_row[2]:%H:%M:%S.%f}"[:-3] if gap_row else "-"
        conn.execute(TICKS)
        with conn.cursor().copy("COPY steady_tick FROM STDIN") as copy:
            for tick in ticks:
                copy.write_row(tick)
        (c50, c95, c99), c_max, (e50, e99) = conn.execute(FROM_COMMIT).fetchone()  # type: ignore[misc]
        series = per_second_series(
            conn.execute(BY_ENQUEUE_SECOND, {"t0": t0}).fetchall(),
            conn.execute(BY_FINISH_SECOND, {"t0": t0}).fetchall(),
            [((at - t0).total_seconds(), figures) for at, figures in cpu.rows()],
        )
    figures = Run(
        rate=rate,
        jobs=int(count),
        p50=float(p50),
        p95=float(p95),
        p99=float(p99),
        max=float(worst),
        max_gap_ms=gap_ms,
        max_gap_at_s=gap_at,
        from_commit=(float(c50), float(c95), float(c99), float(c_max)),
        enqueue=(float(e50), float(e99)),
        producer_lag_ms=lag * 1000,
        series=series,
        cpu=cpu_summary(series),
    )
    log(
        f"  steady at {rate:,.0f}/s: {n} jobs, p50 {figures.p50:.2f} ms, p95 {figures.p95:.2f}, "
        f"p99 {figures.p99:.2f}, max {figures.max:.1f}; longest gap {gap_ms:.1f} ms at "
        f"{gap_at:.1f} s ({gap_when}); producer late by at most {figures.producer_lag_ms:.1f} ms"
    )
    log(
        "    from the enqueue's commit: p50 {:.2f} ms, p95 {:.2f}, p99 {:.2f}, max {:.1f}; "
        "the enqueue itself p50 {:.2f}, p99 {:.2f}".format(*figures.from_commit, *figures.enqueue)
    )
    c = figures.cpu
    if c:
        log(
            f"    CPU (cores, median second): busy {c['busy']:.2f} of {os.cpu_count()}, "
            f"Postgres {c['postgres']:.2f}, workers {c['workers']:.2f}, producer "
            f"{c['producer']:.2f}, steal {c['steal']:.2f}"
            + (
                f"; a task waited for a CPU {c['wait_pct']:.0f}% of the second; p99 against "
                f"that wait r = {c['r_wait_p99']}"
                if "wait_pct" in c
                else ""
            )
        )
    return figures


def cpu_summary(series: dict[str, list[Any]]) -> dict[str, float | None]:
    """The medians of the CPU's per-second figures over the seconds that enqueued jobs,
    and how the per-second p99 follows the time tasks waited for a CPU (Pearson's r)."""
    cpu = series.get("cpu_busy")
    if cpu is None:  # no sample came back
        return {}
    seconds = [i for i, n in enumerate(series["enqueued"]) if n > 0 and cpu[i] is not None]
    if len(seconds) < 3:
        return {}
    median = statistics.median
    summary: dict[str, float | None] = {
        name: round(median(series[f"cpu_{name}"][i] for i in seconds), 3)
        for name in ("busy", "postgres", "workers", "producer", "steal")
    }
    waited = [(series["cpu_wait_pct"][i], series["p99"][i]) for i in seconds]
    waited = [(w, p) for w, p in waited if w is not None]  # no PSI on this kernel
    if len(waited) < 3:
        return summary
    waits, p99s = [w for w, _ in waited], [p for _, p in waited]
    summary["wait_pct"] = round(median(waits), 1)
    try:
        summary["r_wait_p99"] = round(statistics.correlation(waits, p99s), 2)
    except statistics.StatisticsError:  # a constant series
        summary["r_wait_p99"] = None
    return summary


def produce(rate: float, duration: float) -> tuple[int, float, list[tuple[int, datetime]]]:
    """Enqueue round(rate * duration) jobs, each due at i / rate seconds from the start:
    every TICK, the jobs due by then in one transaction. Returns the number enqueued, how
    late (seconds) the producer was at worst for a job beyond one tick, and each
    transaction's first job id and the moment its COMMIT returned."""
    total = max(1, round(rate * duration))
    sent, worst = 0, 0.0
    ticks: list[tuple[int, datetime]] = []
    elapsed = timer()
    while sent < total:
        now = elapsed()
        due = min(total, int(now * rate) + 1)
        if due > sent:
            worst = max(worst, now - sent / rate - TICK)
            if due - sent == 1:
                ids = [async_noop.enqueue(**PAYLOAD).id]
            else:
                with transaction.atomic():
                    ids = async_noop.enqueue_many([PAYLOAD] * (due - sent))
            ticks.append((min(ids), datetime.now(UTC)))
            sent = due
        pause = max(sent / rate, now + TICK) - elapsed()
        if pause > 0:
            time.sleep(pause)
    return sent, max(worst, 0.0), ticks


def per_second_series(
    enqueued: list[tuple[Any, ...]],
    finished: list[tuple[Any, ...]],
    cpu: Sequence[tuple[float, dict[str, float]]] = (),
) -> dict[str, list[Any]]:
    """The run's seconds as columns: second, enqueued, completed, p50, p99, max, gap_ms,
    and, given CPU samples, their figures (bench.cpu) of the sample whose middle falls in
    that second."""
    seconds = max([int(r[0]) for r in enqueued] + [int(r[0]) for r in finished] + [0]) + 1
    columns = ("enqueued", "completed", "p50", "p99", "max", "gap_ms")
    series: dict[str, list[Any]] = {"second": list(range(seconds))}
    series.update({c: [0.0] * seconds for c in columns})
    if cpu:
        # A second with no CPU sample (after the sampler stopped) has none, not a zero.
        series.update({c: [None] * seconds for c in CPU_COLUMNS})
    for s, count, p50, p99, worst in enqueued:
        for column, value in zip(
            ("enqueued", "p50", "p99", "max"), (count, p50, p99, worst), strict=True
        ):
            series[column][int(s)] = round(float(value), 3)
    for s, count, gap in finished:
        series["completed"][int(s)] = float(count)
        series["gap_ms"][int(s)] = round(float(gap or 0.0), 3)
    for at, figures in cpu:
        if 0 <= at < seconds:
            for column, value in figures.items():
                series[column][int(at)] = value
    return series


def result(
    env: BenchEnv,
    runs: list[Run],
    load: str,
    how: str,
    target_p99: float,
    target_gap: float | None,
    drain_rate: float | None,
) -> dict[str, Any]:
    median = statistics.median
    gap = median(r.max_gap_ms for r in runs)
    target = f"p99 <= {target_p99:g} ms" + (
        f" and no gap without completions > {target_gap:g} ms" if target_gap else ""
    )
    row = env.result(
        NAME,
        unit="ms",
        samples=[r.p99 for r in runs],
        baseline_samples=[],
        target=target,
        target_value=target_p99,
        n=runs[0].jobs,
        load=load,
        rate=round(runs[0].rate, 1),
        rate_from=how,
        drain_rate=None if drain_rate is None else round(drain_rate, 1),
        duration_s=round(runs[0].jobs / runs[0].rate, 1),
        p50=round(median(r.p50 for r in runs), 3),
        p95=round(median(r.p95 for r in runs), 3),
        max=round(median(r.max for r in runs), 3),
        max_gap_ms=round(gap, 3),
        max_gap_worst_ms=round(max(r.max_gap_ms for r in runs), 3),
        max_gap_at_s=[round(r.max_gap_at_s, 1) for r in runs],
        from_commit={
            name: round(median(r.from_commit[i] for r in runs), 3)
            for i, name in enumerate(("p50", "p95", "p99", "max"))
        },
        enqueue_p50=round(median(r.enqueue[0] for r in runs), 3),
        enqueue_p99=round(median(r.enqueue[1] for r in runs), 3),
        producer_lag_ms=round(max(r.producer_lag_ms for r in runs), 1),
        method=f"runworker --concurrency {CONCURRENCY} --processes {PROCESSES}, async no-op "
        f"kind; a producer in the bench process enqueues every {TICK * 1000:g} ms the jobs "
        "due by then (enqueue() or enqueue_many() in one transaction); latency = "
        "started_at - created_at of every history row (from_commit: started_at - the "
        "moment the producer's COMMIT returned); gap = longest time between two "
        "successive finished_at; medians over runs",
        series=[r.series for r in runs],
        cpu=[r.cpu for r in runs],
    )
    if target_gap is not None:
        row["target_met"] = bool(row["target_met"]) and gap <= target_gap
    return row
