"""A long run under a mixed load: do the tables, the workers' memory and the rate hold?

The fleet of `steady` (2 processes, concurrency 200) serves a producer at half the
same-run drain of no-op jobs (or `--rate`) for `--duration` seconds (DURATION by
default; an hour is `--duration 3600`), every queue's retention RETENTION seconds (so
the history's leaves span a minute). The jobs, by share of the rate (MIX): no-op
successes, retries (`flaky`: fails twice, then succeeds), failures (`doomed`: fails
both attempts, to the dead letter), jobs that write three log lines (`chatty`), and
flows of FLOW_NODES nodes (one parent, a fan-out of FLOW_PARTS, a join; at most a tick's
share of them per tick, so that a late producer does not starve the other kinds).

Every SAMPLE seconds (at most a tenth of the run) the scenario records: live and
history rows; the total size (tables, indexes, TOAST) of the live table, of the
history's leaves, of the log lines and of the flows with their edges; the number of
history leaves; the workers' resident memory (VmRSS, summed); completions per second
and the p99 pickup latency of the no-op jobs' first attempts over the interval.

After the first retention window and two leaf spans (SETTLE), each size and the RSS
should stop growing: `value` is the fastest growth among them, in percent of its mean
per minute (a least-squares slope over the samples after SETTLE); target: under 1.
`throughput_ratio` is the slowest interval's completions over the producer's rate
after SETTLE. The HTML report plots every sample.
"""

from __future__ import annotations

import statistics
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from django.db import transaction

from bench.harness import BenchEnv, log, timer
from bench.jobs import QUEUE, async_noop, chatty, doomed, flaky
from bench.scenarios.steady import producer_rate
from bench.workers import configure_queue, fleet
from queue_engine.flows import Flow
from queue_engine.schema import partitions as history

NAME = "soak"
PROCESSES = 2
DURATION = 600.0  # seconds
RETENTION = 300  # seconds, every queue and state
SETTLE = RETENTION + 2 * 60  # seconds before growth counts: a window and two leaves
SAMPLE = 60.0  # seconds between samples, at most
TICK = 0.05  # seconds between the producer's enqueues
TARGET_GROWTH = 1.0  # percent of the mean per minute
FLOW_PARTS = 8
FLOW_NODES = FLOW_PARTS + 2
MIX = {"noop": 0.73, "flaky": 0.08, "doomed": 0.04, "chatty": 0.10, "flow": 0.05}
PAYLOAD = {"to": "user@example.com", "subject": "soak"}

WINDOWS = [
    f"UPDATE {table} SET retain_succeeded = %(w)s, retain_failed = %(w)s, retain_cancelled = %(w)s"
    for table in ("queue_engine_queuedefaults", "queue_engine_queueconfig")
]
SIZES = """
SELECT (SELECT count(*) FROM queue_engine_job),
       (SELECT count(*) FROM queue_engine_jobrecord),
       pg_total_relation_size('queue_engine_job'),
       (SELECT COALESCE(sum(pg_total_relation_size(relid)), 0)
          FROM pg_partition_tree('queue_engine_jobrecord') WHERE isleaf),
       (SELECT COALESCE(sum(pg_total_relation_size(relid)), 0)
          FROM pg_partition_tree('queue_engine_joblog') WHERE isleaf),
       pg_total_relation_size('queue_engine_flow')
         + pg_total_relation_size('queue_engine_flowedge'),
       (SELECT count(*) FROM pg_partition_tree('queue_engine_jobrecord') WHERE isleaf)
"""
RECENT = """
SELECT count(*),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - created_at))
         FILTER (WHERE kind = 'bench.async_noop' AND attempt = 1 AND flow_id IS NULL)
  FROM queue_engine_jobrecord WHERE finished_at >= now() - make_interval(secs => %(s)s)
"""
SIZE_COLUMNS = ("live_mb", "history_mb", "logs_mb", "flows_mb", "rss_mb")


def run(env: BenchEnv) -> list[dict[str, Any]]:
    duration = env.duration or DURATION
    every = min(SAMPLE, duration / 10)
    with fleet(env, QUEUE, processes=PROCESSES) as workers:
        rate, how, drain_rate = producer_rate(env, workers)
        env.truncate()
        configure_queue(env, QUEUE, paused=False)
        with env.connect() as conn:
            for statement in WINDOWS:
                conn.execute(statement, {"w": RETENTION})  # type: ignore[arg-type]
            respan_leaves(conn)
        stop = threading.Event()
        samples: list[dict[str, float]] = []
        sampler = threading.Thread(
            target=sample_every, args=(env, workers.worker_pids(), every, stop, samples)
        )
        sampler.start()
        try:
            sent = produce(rate, duration)
        finally:
            stop.set()
            sampler.join()
        workers.check_alive()
    env.truncate()  # with the fleet stopped: it may still be settling a backlog
    settle = min(SETTLE, duration / 2)  # a short run (a try of the bench) has its second half
    after = [s for s in samples if s["minute"] * 60 >= settle]
    growth = {c: growth_per_minute(after, c) for c in SIZE_COLUMNS}
    worst = max(growth, key=lambda c: growth[c]) if after else None
    rates = [s["completed_per_s"] for s in after]
    log(
        f"  soak: {sent:,} jobs at {rate:,.0f}/s over {duration:.0f} s; growth per minute "
        + ", ".join(f"{c} {g:+.2f}%" for c, g in growth.items())
    )
    return [
        env.result(
            NAME,
            unit="%/min",
            samples=[growth[worst]] if worst else [],
            baseline_samples=[],
            target=f"every size and the RSS grow < {TARGET_GROWTH:g}% a minute after "
            f"{settle:g} s; throughput holds",
            target_value=TARGET_GROWTH,
            higher_is_better=False,
            n=sent,
            rate=round(rate, 1),
            rate_from=how,
            drain_rate=None if drain_rate is None else round(drain_rate, 1),
            duration_s=duration,
            retention_s=RETENTION,
            mix=MIX,
            fastest_growing=worst,
            growth_pct_per_min={c: round(g, 3) for c, g in growth.items()},
            throughput_ratio=round(min(rates) / rate, 3) if rates else None,
            minutes={k: [s[k] for s in samples] for k in samples[0]} if samples else {},
        )
    ]


def respan_leaves(conn: psycopg.Connection[Any]) -> None:
    """Drop the (empty) leaf that holds the present, made with the longer windows of
    before, and wait for the leader to make leaves of the new span in its place (it
    replaces those ahead of the clock itself)."""
    with conn.cursor() as cur:
        now, _, longest, leaves = history.plan(cur)
    for leaf in leaves:
        if leaf.lo <= now + history.LEAD:
            conn.execute(f"DROP TABLE {leaf.name}")  # type: ignore[arg-type]  # from the catalog
    span = timedelta(seconds=history.span_for(longest["succeeded"]))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with conn.cursor() as cur:
            now, _, _, leaves = history.plan(cur)
        ahead = [leaf for leaf in leaves if leaf.state == "succeeded" and leaf.hi > now]
        if ahead and all(leaf.hi - leaf.lo <= span for leaf in ahead):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the leader made no leaves of {span} within a minute")


def produce(rate: float, duration: float) -> int:
    """Enqueue the mix at `rate` jobs (flow nodes count one each) a second for
    `duration` seconds: every TICK, what is due by then, one transaction per kind and
    one per flow. Returns the number of jobs enqueued."""
    total = round(rate * duration)
    sent = dict.fromkeys(MIX, 0)
    elapsed = timer()
    while sum(sent.values()) < total:
        due_all = min(total, int(elapsed() * rate) + 1)
        for name, share in MIX.items():
            due = int(due_all * share) - sent[name]
            if name == "flow":
                flows = min(due // FLOW_NODES, max(1, round(rate * TICK * share / FLOW_NODES)))
                for _ in range(flows):
                    submit_flow()
                sent[name] += flows * FLOW_NODES
            elif due > 0:
                kind = {"noop": async_noop, "flaky": flaky, "doomed": doomed, "chatty": chatty}
                with transaction.atomic():
                    kind[name].enqueue_many([PAYLOAD] * due)
                sent[name] += due
        if elapsed() >= duration:
            break
        time.sleep(TICK)
    return sum(sent.values())


def submit_flow() -> None:
    flow = Flow("soak")
    flow.add("fetch", async_noop, **PAYLOAD)
    parts = flow.fan_out("part", async_noop, [PAYLOAD] * FLOW_PARTS, depends_on=["fetch"])
    flow.add("report", async_noop, depends_on=parts, **PAYLOAD)
    flow.submit()


def sample_every(
    env: BenchEnv,
    pids: list[int],
    every: float,
    stop: threading.Event,
    samples: list[dict[str, float]],
) -> None:
    # On a fixed schedule, not `every` after the last sample ended: the history's size
    # is a sawtooth with the leaves' span (a minute), and samples that drift against it
    # (62 s apart) draw a slow beat that a regression reads as growth.
    started = time.monotonic()
    taken = 0
    with env.connect() as conn:
        while not stop.wait(max(0.0, started + (taken + 1) * every - time.monotonic())):
            taken += 1
            live, records, live_b, history_b, logs_b, flows_b, leaves = conn.execute(
                SIZES
            ).fetchone()  # type: ignore[misc]
            done, p99 = conn.execute(RECENT, {"s": every}).fetchone()  # type: ignore[misc]
            mb = 1024 * 1024
            samples.append(
                {
                    "minute": round((time.monotonic() - started) / 60, 2),
                    "live_rows": int(live),
                    "history_rows": int(records),
                    "leaves": int(leaves),
                    "live_mb": round(float(live_b) / mb, 2),
                    "history_mb": round(float(history_b) / mb, 2),
                    "logs_mb": round(float(logs_b) / mb, 2),
                    "flows_mb": round(float(flows_b) / mb, 2),
                    "rss_mb": round(sum(rss_kb(pid) for pid in pids) / 1024, 1),
                    "completed_per_s": round(int(done) / every, 1),
                    "p99_ms": round(float(p99 or 0.0) * 1000, 2),
                }
            )
            log(f"  soak sample: {samples[-1]}")


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def growth_per_minute(samples: list[dict[str, float]], column: str) -> float:
    """The least-squares slope of a column over the samples, in percent of its mean per
    minute; 0 with fewer than two samples or a mean of 0."""
    if len(samples) < 2:
        return 0.0
    xs = [s["minute"] for s in samples]
    ys = [s[column] for s in samples]
    mean = statistics.fmean(ys)
    if not mean:
        return 0.0
    slope = statistics.linear_regression(xs, ys).slope
    return 100 * slope / mean
