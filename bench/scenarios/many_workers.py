"""Many workers on one Postgres: one leader, a true registry, few connections, no herd.

PROCESSES worker processes (`runworker --processes 20 --concurrency 50`) serve one queue.
Once they are ready the scenario reads:

- the registry: workers registered with a recent heartbeat, and how many say they lead;
- the leader's advisory lock: how many sessions hold it (exactly one);
- connections: the fleet's sessions in `pg_stat_activity`, by application name, and
  per worker process;
- the herd: JOBS jobs enqueued one at a time, SPACING apart, each with its NOTIFY, into
  the idle fleet. Every claim reads the paused kinds (`queue_engine_kindcontrol`) once,
  and nothing else the fleet runs does, so that table's scans
  (`pg_stat_user_tables`) over that time, less those of the same time idle (the
  workers' polls), divided by JOBS are the claims each job cost. (The claim index's
  scans are no measure: a claim walks it once or twice, from its floor.) One worker
  woken per job gives about 2 (its claim, then its settle's); every worker woken
  gives PROCESSES or more.

Statistics reach `pg_stat_user_tables` when a backend goes idle, at most STATS_DELAY
seconds later: each reading waits that long first. `value` = claims per job, with no
baseline (the target: well below PROCESSES)."""

from __future__ import annotations

import time
from typing import Any

from bench.harness import BenchEnv, log
from bench.jobs import QUEUE, async_noop
from bench.workers import COUNT_RECORDS, configure_queue, fleet, wait_until

NAME = "many_workers"
PROCESSES = 20
CONCURRENCY = 50
JOBS = 200
SPACING = 0.05  # seconds between two enqueues
STATS_DELAY = 11.0  # PostgreSQL flushes an idle backend's statistics within 10 s
TARGET = 3.0  # claims per job

CLAIMS = """
SELECT seq_scan + COALESCE(idx_scan, 0) FROM pg_stat_user_tables
 WHERE relname = 'queue_engine_kindcontrol'
"""
REGISTRY = """
SELECT count(*), count(*) FILTER (WHERE is_leader)
  FROM queue_engine_workerprocess WHERE heartbeat_at > now() - interval '15 seconds'
"""
LEADER_LOCKS = """
SELECT count(*) FROM pg_locks
 WHERE locktype = 'advisory' AND granted AND objsubid = 1
   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND classid::bigint = %(high)s AND objid::bigint = %(low)s
"""
CONNECTIONS = """
SELECT application_name, count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND application_name LIKE 'queue_engine %%'
 GROUP BY 1 ORDER BY 1
"""


def run(env: BenchEnv) -> list[dict[str, Any]]:
    from queue_engine.sql import LEADER_LOCK_KEY

    with fleet(env, QUEUE, processes=PROCESSES, concurrency=CONCURRENCY) as workers:
        env.truncate()
        configure_queue(env, QUEUE, paused=False)
        with env.connect() as conn:
            time.sleep(STATS_DELAY)
            alive, leaders = conn.execute(REGISTRY).fetchone()  # type: ignore[misc]
            key = {"high": LEADER_LOCK_KEY >> 32, "low": LEADER_LOCK_KEY & 0xFFFFFFFF}
            locks = int(conn.execute(LEADER_LOCKS, key).fetchone()[0])  # type: ignore[index]
            by_name = {str(n): int(c) for n, c in conn.execute(CONNECTIONS).fetchall()}
            workers.check_alive()

            busy_for = JOBS * SPACING
            idle = claims_during(conn, lambda: time.sleep(busy_for))
            enqueued = claims_during(conn, lambda: enqueue_one_at_a_time(env, conn))
    per_job = max(enqueued - idle, 0) / JOBS
    connections = sum(by_name.values())
    log(
        f"  many_workers: {alive} alive, {leaders} leading, {locks} holding the lock; "
        f"{connections} connections ({connections / PROCESSES:.1f} per worker: {by_name}); "
        f"claims {enqueued} for {JOBS} jobs, {idle} idle: {per_job:.2f} per job"
    )
    row = env.result(
        NAME,
        unit="claims/job",
        samples=[per_job],
        baseline_samples=[],
        target=f"claims per job <= {TARGET:g} with {PROCESSES} workers; one leader",
        target_value=TARGET,
        higher_is_better=False,
        n=JOBS,
        processes=PROCESSES,
        concurrency=CONCURRENCY,
        alive=int(alive),
        leaders=int(leaders),
        leader_locks=locks,
        connections=connections,
        connections_per_worker=round(connections / PROCESSES, 2),
        connections_by_name=by_name,
        claims=enqueued,
        idle_claims=idle,
        method=f"runworker --processes {PROCESSES} --concurrency {CONCURRENCY}; {JOBS} jobs "
        f"enqueued one at a time {SPACING * 1000:g} ms apart into the idle fleet; claims = "
        "scans of the paused kinds (read once by each claim) then, less those of as long idle",
    )
    row["target_met"] = bool(row["target_met"]) and leaders == 1 and locks == 1
    row["target_met"] = row["target_met"] and alive == PROCESSES
    return [row]


def claims_during(conn: Any, action: Any) -> int:
    """Claims sent while `action` runs (each reading after STATS_DELAY)."""
    before = int(conn.execute(CLAIMS).fetchone()[0])
    action()
    time.sleep(STATS_DELAY)
    return int(conn.execute(CLAIMS).fetchone()[0]) - before


def enqueue_one_at_a_time(env: BenchEnv, conn: Any) -> None:
    for _ in range(JOBS):
        async_noop.enqueue(to="user@example.com")
        time.sleep(SPACING)
    wait_until(conn, COUNT_RECORDS, lambda c: c >= JOBS, what=f"{JOBS} jobs to end")
