"""Fair share between group keys: the pickup latency of quiet keys beside a busy key's
backlog, against the same quiet keys with no backlog, in the same run.

One `runworker` process (async no-op kind) serves one queue with fair_share on. Ten
quiet keys each enqueue a job every 100 ms (one INSERT of ten jobs a tick) for
`--duration` seconds (default DURATION): first with nothing else queued, then beside a
backlog of one busy key (BACKLOG jobs, default 200,000; `FAIRNESS_BACKLOG=20000` for a
quick try) enqueued, paused, just before. Pickup latency is `started_at - created_at`
of the quiet jobs' history rows. `value` is their p99 beside the backlog, `baseline`
their p99 with none, so `ratio` is what the backlog costs a quiet key; target <= 3.
The backlog must outlast the window (`backlog_left`), or the run says so.
"""

from __future__ import annotations

import os
import time
from typing import Any

from bench.harness import BenchEnv, log
from bench.jobs import ASYNC_KIND, QUEUE
from bench.workers import configure_queue, fleet, percentile, wait_until

NAME = "fairness"
BACKLOG = int(os.environ.get("FAIRNESS_BACKLOG", "200000"))
QUIET_KEYS = 10
TICK = 0.1  # seconds between a quiet key's jobs
DURATION = 10.0  # seconds of quiet enqueues in each phase
TARGET_RATIO = 3.0
CONCURRENCY = int(os.environ.get("FAIRNESS_CONCURRENCY", "200"))

FILL_BACKLOG = """
INSERT INTO queue_engine_job (queue, kind, payload, group_key)
SELECT %s, %s, '{"to": "busy@example.com"}', 'busy' FROM generate_series(1, %s)
"""
ENQUEUE_QUIET = """
INSERT INTO queue_engine_job (queue, kind, payload, group_key)
SELECT %s, %s, '{"to": "quiet@example.com"}', 'quiet-' || k FROM generate_series(1, %s) k
RETURNING id
"""
LATENCIES = """
SELECT EXTRACT(epoch FROM started_at - created_at) * 1000 FROM queue_engine_jobrecord
 WHERE id = ANY(%s)
"""
DONE = "SELECT count(*) FROM queue_engine_jobrecord WHERE id = ANY(%s)"
BACKLOG_LEFT = "SELECT count(*) FROM queue_engine_job WHERE group_key = 'busy'"


def run(env: BenchEnv) -> list[dict[str, Any]]:
    duration = env.duration or DURATION
    try:
        with fleet(env, QUEUE, processes=1, concurrency=CONCURRENCY) as workers:
            fair(env)
            env.truncate()
            alone = quiet_phase(env, duration)
            env.truncate()
            configure_queue(env, QUEUE, paused=True)
            fair(env)
            with env.connect() as conn:
                conn.execute(FILL_BACKLOG, [QUEUE, ASYNC_KIND, BACKLOG])
                conn.execute("ANALYZE queue_engine_job")
            configure_queue(env, QUEUE, paused=False)
            fair(env)
            beside = quiet_phase(env, duration)
            with env.connect() as conn:
                row = conn.execute(BACKLOG_LEFT).fetchone()
                left = int(row[0]) if row else 0
            workers.check_alive()
    finally:
        configure_queue(env, QUEUE, paused=False)  # fair_share off for later scenarios
    p50, p99 = percentile(beside, 50), percentile(beside, 99)
    base_p50, base_p99 = percentile(alone, 50), percentile(alone, 99)
    log(
        f"  quiet keys' pickup: p50 {p50:.2f} ms, p99 {p99:.2f} ms beside the backlog "
        f"({left:,} of {BACKLOG:,} left); p50 {base_p50:.2f} ms, p99 {base_p99:.2f} ms alone"
    )
    if left == 0:
        log("  the backlog ran out before the window ended: the ratio understates its cost")
    return [
        env.result(
            NAME,
            unit="ms",
            samples=[p99],
            baseline_samples=[base_p99],
            target=f"p99 beside the backlog <= {TARGET_RATIO:g} x p99 without it",
            target_ratio=TARGET_RATIO,
            n=len(beside),
            p50=round(p50, 3),
            p99=round(p99, 3),
            baseline_p50=round(base_p50, 3),
            baseline_p99=round(base_p99, 3),
            backlog=BACKLOG,
            backlog_left=left,
            method=f"runworker --concurrency {CONCURRENCY} (1 process), async no-op kind, queue "
            f"with fair_share on; {QUIET_KEYS} quiet keys each enqueue a job every "
            f"{TICK * 1000:g} ms for {duration:g} s beside one busy key's backlog of "
            f"{BACKLOG:,} jobs; started_at - created_at of the quiet jobs; one run",
            baseline_method="the same quiet keys, same worker, no backlog, just before",
        )
    ]


def fair(env: BenchEnv) -> None:
    with env.connect() as conn:
        conn.execute(
            "UPDATE queue_engine_queueconfig SET fair_share = true WHERE name = %s", [QUEUE]
        )


def quiet_phase(env: BenchEnv, duration: float) -> list[float]:
    """Every TICK, a job for each quiet key, for `duration` seconds; their latencies (ms)."""
    ids: list[int] = []
    with env.connect() as conn:
        start = time.perf_counter()
        tick = 0
        while tick * TICK < duration:
            delay = start + tick * TICK - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            rows = conn.execute(ENQUEUE_QUIET, [QUEUE, ASYNC_KIND, QUIET_KEYS]).fetchall()
            ids.extend(int(r[0]) for r in rows)
            tick += 1
        query = DONE.replace("%s", "'{" + ",".join(map(str, ids)) + "}'::bigint[]")
        wait_until(conn, query, lambda c: c >= len(ids), what=f"{len(ids)} quiet jobs run")
        return [float(r[0]) for r in conn.execute(LATENCIES, [ids]).fetchall()]
