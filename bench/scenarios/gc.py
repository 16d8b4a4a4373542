"""Expiring a day of history: dropping leaves of the partitioned history against deleting
rows, in the same run.

N succeeded jobs of one queue ended evenly over the last DAYS days, every window one
day. Two copies of the same rows:

- `value`: the partitioned history (queue_engine.schema.partitions) with leaves of the span the
  engine picks for a one-day window, covering those days; the leader's service
  (`keep_partitions`) runs until it has nothing left to drop. Seconds, and WAL bytes
  written (`wal_bytes`).
- `baseline`: the same rows in a plain table with the history's indexes, expired by
  one `DELETE` of every row past the window, the fastest a DELETE gets (retention
  deleted in batches, never holding a long transaction, which costs more), then the
  `VACUUM` without which the space stays taken (`delete_only_s`: the DELETE alone).

The live job table's statistics (rows written, index scans) are read before and after
the drop (`live_table_touched`: whether any moved). A row's leaf goes once its whole
span is past the window, so the drop removes up to one span fewer rows than the
DELETE: both counts are reported.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from typing import Any

import psycopg

from bench.harness import BenchEnv, log, timer
from queue_engine.schema import partitions as history
from queue_engine.worker.services import keep_partitions

NAME = "gc"
N = 5_000_000
DAYS = 7
WINDOW = 86400  # seconds: every queue, every state
TARGET = 0.01  # the drop's time, as a share of the DELETE's
PLAIN = "bench_gc_history"

INSERT_ROWS = """
INSERT INTO {table} (id, queue, kind, state, attempt, max_attempts, run_at, created_at,
                     started_at, finished_at)
SELECT i, 'gc', 'bench.noop', 'succeeded', 1, 20, f - interval '2 ms', f - interval '2 ms',
       f - interval '1 ms', f
  FROM (SELECT i, %(start)s::timestamptz
                  + (%(end)s::timestamptz - %(start)s::timestamptz) * (i::float8 / %(n)s) AS f
          FROM generate_series(1, %(n)s::bigint) AS i) g
"""
WINDOWS = """
INSERT INTO queue_engine_queueconfig (name, retain_succeeded, retain_failed, retain_cancelled)
VALUES ('gc', %(w)s, %(w)s, %(w)s)
ON CONFLICT (name) DO UPDATE SET retain_succeeded = %(w)s, retain_failed = %(w)s,
                                 retain_cancelled = %(w)s
"""
DEFAULT_WINDOWS = """
UPDATE queue_engine_queuedefaults SET retain_succeeded = %(w)s, retain_failed = %(w)s,
                                      retain_cancelled = %(w)s
"""
WATERMARK = """
INSERT INTO queue_engine_rollupstate (name, rolled_up_to) VALUES ('metrics', now())
ON CONFLICT (name) DO UPDATE SET rolled_up_to = now()
"""
# The baseline: one statement, the fastest a DELETE gets (retention deletes in batches of
# 5,000 so as never to hold a long transaction, which costs more).
DELETE_EXPIRED = f"""
DELETE FROM {PLAIN} WHERE finished_at < now() - make_interval(secs => %(keep)s)
"""
WAL = "SELECT pg_current_wal_lsn()"
WAL_SINCE = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)::bigint"
LIVE_TABLE = """
SELECT n_tup_ins + n_tup_upd + n_tup_del, COALESCE(idx_scan, 0) + COALESCE(seq_scan, 0)
  FROM pg_stat_user_tables WHERE relid = 'queue_engine_job'::regclass
"""
COUNT_HISTORY = "SELECT count(*) FROM queue_engine_jobrecord"


def run(env: BenchEnv) -> list[dict[str, Any]]:
    drops: list[float] = []
    deletes: list[float] = []
    details: list[dict[str, Any]] = []  # one per repeat
    with env.connect() as conn:
        conn.execute(WINDOWS, {"w": WINDOW})
        conn.execute(DEFAULT_WINDOWS, {"w": WINDOW})
        conn.execute(f"DROP TABLE IF EXISTS {PLAIN}")
        conn.execute(f"CREATE TABLE {PLAIN} (LIKE queue_engine_jobrecord INCLUDING ALL)")
    for rep in range(env.repeats):
        env.truncate()
        with env.connect() as conn:
            drop_past_leaves(conn)
            conn.execute(f"TRUNCATE {PLAIN}")
            now: datetime = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
            start = now - timedelta(days=DAYS)
            made = timer()
            with conn.cursor() as cur:
                leaves = len(history.backfill_leaves(cur, start, ["succeeded"]))
            for table in ("queue_engine_jobrecord", PLAIN):
                conn.execute(
                    INSERT_ROWS.format(table=table),  # type: ignore[arg-type]  # a fixed name
                    {"start": start, "end": now, "n": N},
                )
                conn.execute(f"VACUUM ANALYZE {table}")
            conn.execute(WATERMARK)
            conn.execute("CHECKPOINT")
            log(f"  {N:,} rows twice, {leaves} past leaves, in {made():.0f} s")
            entry: dict[str, Any] = {}
            details.append(entry)
            order = [drop, delete] if rep % 2 == 0 else [delete, drop]
            for arm in order:
                arm(env, conn, entry)
        drops.append(entry["drop_s"])
        deletes.append(entry["delete_s"])
    row = env.result(
        NAME,
        unit="s",
        samples=drops,
        baseline_samples=deletes,
        target=f"dropping leaves <= {TARGET:.0%} of the DELETE's time; live table untouched",
        target_ratio=TARGET,
        higher_is_better=False,
        n=N,
        days=DAYS,
        window_s=WINDOW,
        span_s=history.span_for(WINDOW),
        runs=details,
        wal_bytes=details[-1]["drop_wal_bytes"],
        baseline_wal_bytes=details[-1]["delete_wal_bytes"],
        live_table_touched=any(d["live_table_touched"] for d in details),
    )
    return [row]


def drop(env: BenchEnv, conn: psycopg.Connection[Any], entry: dict[str, Any]) -> None:
    before_rows = conn.execute(COUNT_HISTORY).fetchone()[0]  # type: ignore[index]
    live = conn.execute(LIVE_TABLE).fetchone()
    lsn = conn.execute(WAL).fetchone()[0]  # type: ignore[index]
    started = time.perf_counter()
    dropped = asyncio.run(drop_all(env.conninfo))
    seconds = time.perf_counter() - started
    wal = conn.execute(WAL_SINCE, [lsn]).fetchone()[0]  # type: ignore[index]
    time.sleep(0.6)  # the statistics reach the shared view after at most 500 ms
    conn.execute("SELECT pg_stat_clear_snapshot()")
    after_live = conn.execute(LIVE_TABLE).fetchone()
    gone = before_rows - conn.execute(COUNT_HISTORY).fetchone()[0]  # type: ignore[index]
    entry.update(
        drop_s=seconds,
        drop_leaves=dropped,
        drop_rows=gone,
        drop_wal_bytes=wal,
        live_table_touched=live != after_live,
    )
    log(f"  drop: {dropped} leaves, {gone:,} rows in {seconds:.3f} s, {wal:,} bytes of WAL")


def delete(env: BenchEnv, conn: psycopg.Connection[Any], entry: dict[str, Any]) -> None:
    lsn = conn.execute(WAL).fetchone()[0]  # type: ignore[index]
    started = time.perf_counter()
    gone = conn.execute(DELETE_EXPIRED, {"keep": WINDOW}).rowcount
    deleted = time.perf_counter() - started
    conn.execute(f"VACUUM {PLAIN}")
    seconds = time.perf_counter() - started
    wal = conn.execute(WAL_SINCE, [lsn]).fetchone()[0]  # type: ignore[index]
    entry.update(delete_s=seconds, delete_only_s=deleted, delete_rows=gone, delete_wal_bytes=wal)
    log(
        f"  DELETE: {gone:,} rows in {deleted:.1f} s, and VACUUM in {seconds - deleted:.1f} s"
        f", {wal:,} bytes of WAL"
    )


async def drop_all(conninfo: str) -> int:
    """Run the leader's service until a pass drops nothing; the leaves it dropped."""
    dropped = 0
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        while True:
            kept = await keep_partitions(conn)
            dropped += kept.dropped
            if not kept.dropped and not kept.waited:
                return dropped


def drop_past_leaves(conn: psycopg.Connection[Any]) -> None:
    """The leaves a previous repeat added and did not drop (those within the window)."""
    now: datetime = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    with conn.cursor() as cur:
        _, _, _, leaves = history.plan(cur)
    for leaf in leaves:
        if leaf.hi <= now:
            conn.execute(f"DROP TABLE {leaf.name}")  # type: ignore[arg-type]  # from the catalog
