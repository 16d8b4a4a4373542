"""A production-sized console dataset, written straight to the tables in bulk.

`seed(env, history=n)` empties the console's tables, then writes: n ended jobs
(succeeded, failed with their errors, cancelled) over eight queues, finishing
across the last 30 days in id order, as the history is appended; a live table
of a few thousand available, scheduled and running jobs; flows (finished ones
in history, running ones half live); 300 log lines of one dead job; schedules,
workers, audit events and queue settings. Then the metrics rollup runs over the
whole history (`queue_engine.worker.services.rollup.roll_up`, as the leader
would), and the tables are vacuumed and analyzed, as autovacuum would have done
on a system that has run for a month (the history first: the rollup's time ranges
need the BRIN index's summaries).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from bench import console_sql as q
from bench.harness import BenchEnv, log, timer
from queue_engine.schema import partitions as leaves

SPAN = timedelta(days=30)
RETAIN = int(timedelta(days=35).total_seconds())  # longer than SPAN: nothing seeded is expired
LIVE = 3_000
DONE_FLOWS, DONE_FLOW_PARTS = 300, 10
RUNNING_FLOWS, RUNNING_FLOW_CHILDREN = 10, 50
LOG_LINES = 300
SCHEDULES = 40
AUDIT_EVENTS = 5_000

TABLES = (
    "queue_engine_job",
    "queue_engine_jobrecord",
    "queue_engine_joblog",
    "queue_engine_flow",
    "queue_engine_flowedge",
    "queue_engine_metricbucket",
    "queue_engine_rollupstate",
    "queue_engine_schedule",
    "queue_engine_workerprocess",
    "queue_engine_auditevent",
    "queue_engine_grouplimit",
    "queue_engine_queueconfig",
)


@dataclass(frozen=True)
class QueueSpec:
    name: str
    share: float  # of all jobs
    kinds: tuple[str, ...]
    fail: float  # share of its jobs that end dead
    max_attempts: int
    run_seconds: float  # mean run time
    errors: tuple[tuple[str, str], ...]  # (class, message with {n} for a number)


QUEUES = (
    QueueSpec(
        "emails",
        0.30,
        ("shop.send_receipt", "shop.send_welcome", "shop.send_reminder"),
        0.02,
        5,
        0.4,
        (
            ("smtplib.SMTPRecipientsRefused", "recipient user{n}@example.com refused"),
            ("TimeoutError", "SMTP server did not answer within 10 s"),
        ),
    ),
    QueueSpec(
        "webhooks",
        0.20,
        ("hooks.deliver", "hooks.redeliver"),
        0.08,
        8,
        0.3,
        (
            ("httpx.ConnectTimeout", "timed out connecting to https://hooks.example.com/{n}"),
            ("httpx.HTTPStatusError", "server error 503 from https://hooks.example.com/{n}"),
        ),
    ),
    QueueSpec(
        "notifications",
        0.15,
        ("push.send", "sms.send"),
        0.03,
        5,
        0.2,
        (("push.InvalidToken", "device token {n} is no longer registered"),),
    ),
    QueueSpec(
        "search-index",
        0.12,
        ("search.index_product", "search.reindex_category"),
        0.01,
        3,
        0.8,
        (("elastic_transport.ConnectionError", "connection reset by search-{n}"),),
    ),
    QueueSpec(
        "media",
        0.08,
        ("media.resize_image", "media.transcode_video", "media.thumbnail"),
        0.05,
        3,
        6.0,
        (
            ("PIL.UnidentifiedImageError", "cannot identify image file upload-{n}.jpg"),
            ("MemoryError", "transcode of video {n} ran out of memory"),
        ),
    ),
    QueueSpec(
        "billing",
        0.07,
        ("billing.charge_card", "billing.refund", "billing.invoice"),
        0.06,
        3,
        1.2,
        (
            ("billing.CardDeclined", "card for order {n} was declined"),
            ("stripe.RateLimitError", "too many requests for account acct_{n}"),
        ),
    ),
    QueueSpec(
        "reports",
        0.05,
        ("reports.daily_sales", "reports.export_csv"),
        0.04,
        2,
        45.0,
        (("psycopg.errors.QueryCanceled", "report {n} ran past the statement timeout"),),
    ),
    QueueSpec(
        "exports",
        0.03,
        ("exports.build_archive", "exports.upload_s3"),
        0.05,
        2,
        30.0,
        (("botocore.exceptions.ClientError", "upload of export {n} was denied"),),
    ),
)


def queue_spec() -> str:
    """The queues as a JSON document for the seeding statements' `spec` table."""
    rows, low = [], 0.0
    for queue in QUEUES:
        rows.append(
            {
                "queue": queue.name,
                "lo": low,
                "hi": low + queue.share,
                "kinds": list(queue.kinds),
                "fail": queue.fail,
                "max_attempts": queue.max_attempts,
                "run_seconds": queue.run_seconds,
                "error_classes": [c for c, _ in queue.errors],
                "error_messages": [m for _, m in queue.errors],
            }
        )
        low += queue.share
    rows[-1]["hi"] = 1.0
    return json.dumps(rows)


# --- seeding -------------------------------------------------------------------------


@dataclass(frozen=True)
class Seeded:
    """What the measured pages point at."""

    history: int
    newest_id: int
    middle_id: int  # a job about 15 days old: an older page starts before it
    dead_job: int  # a dead job with errors and log lines
    flow: int  # a running flow


def seed(env: BenchEnv, history: int) -> Seeded:
    started = timer()
    spec = queue_spec()
    names = [queue.name for queue in QUEUES]
    flow_records = DONE_FLOWS * (DONE_FLOW_PARTS + 2) + RUNNING_FLOWS * (
        1 + RUNNING_FLOW_CHILDREN // 2
    )
    main = history - flow_records
    with env.connect() as conn:
        truncate(conn)
        conn.execute(q.INSERT_QUEUES, {"names": names, "retain": RETAIN})
        # The history's leaves for the seeded month, as a leader would have made them
        # over it (their span follows the queues' windows).
        now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        with conn.cursor() as cur:
            leaves.backfill_leaves(cur, now - SPAN - timedelta(days=1))
        conn.execute(q.INSERT_GROUP_LIMITS)
        conn.execute("SELECT setseed(0.42)")
        conn.execute(q.INSERT_HISTORY, {"spec": spec, "n": main, "span": SPAN})
        conn.execute(q.SET_JOB_ID_SEQUENCE, [main])
        log(f"console_pages: {main:,} history rows in {started():.1f} s")
        flow = seed_flows(conn)
        conn.execute(q.INSERT_LIVE, {"spec": spec, "n": LIVE})
        dead_job, attempts = one(conn, q.NEWEST_DEAD_BILLING)
        conn.execute(q.INSERT_LOG_LINES, {"job": dead_job, "attempts": attempts, "n": LOG_LINES})
        kinds = [kind for queue in QUEUES for kind in queue.kinds]
        conn.execute(q.INSERT_SCHEDULES, {"kinds": kinds, "n": SCHEDULES, "job": main})
        conn.execute(q.INSERT_WORKERS, {"queues": names[2:5]})
        conn.execute(
            q.INSERT_AUDIT, {"n": AUDIT_EVENTS, "span": SPAN, "max_id": main, "queues": names}
        )
        newest_id = one(conn, "SELECT max(id) FROM queue_engine_job")[0]
    # Vacuumed first: until then the BRIN index on finished_at has no summary of the new
    # rows' pages, and every time range the rollup reads would scan the whole table.
    vacuum_analyze(env, TABLES)
    roll_up_everything(env.conninfo)
    # The catch-up wrote 30 days of minute buckets and pruned all but the last 3 days:
    # compacted, the table is what a system that rolled up as it went holds (a tenth).
    with env.connect() as conn:
        conn.execute(q.VACUUM_FULL_METRICS)
    log(f"console_pages: seeded {history:,} history rows and the rest in {started():.1f} s")
    return Seeded(history, newest_id, main // 2, dead_job, flow)


def vacuum_analyze(env: BenchEnv, tables: Sequence[str]) -> None:
    with env.connect() as conn:
        for table in tables:
            conn.execute(q.VACUUM_ANALYZE.format(sql.Identifier(table)))


def truncate(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        sql.SQL("TRUNCATE {} RESTART IDENTITY").format(
            sql.SQL(", ").join(sql.Identifier(t) for t in TABLES)
        )
    )


def one(conn: psycopg.Connection[Any], query: str) -> tuple[Any, ...]:
    row = conn.execute(query).fetchone()
    assert row is not None
    return tuple(row)


def seed_flows(conn: psycopg.Connection[Any]) -> int:
    """Finished flows (root, parts, join) in history; running ones, half done. Returns one
    running flow's id."""
    now: datetime = one(conn, q.DATABASE_NOW)[0]
    records: list[tuple[Any, ...]] = []
    jobs: list[tuple[Any, ...]] = []
    edges: list[tuple[int, int, int]] = []
    with conn.transaction(), conn.cursor() as cur:
        for f in range(DONE_FLOWS):
            created = now - timedelta(days=7) * (1 - f / DONE_FLOWS)
            failed = f % 20 == 7
            state = "failed" if failed else "succeeded"
            flow_id = flow_row(cur, f"order fulfilment {1000 + f}", state, created, True)
            ids = next_ids(cur, DONE_FLOW_PARTS + 2)
            root, parts, join = ids[0], ids[1:-1], ids[-1]
            nodes = [(root, "root", "reports.daily_sales", "succeeded")]
            for k, part in enumerate(parts, 1):
                dead = failed and k == 3
                nodes.append((part, f"part-{k}", "exports.build_archive", state_of(dead)))
            nodes.append(
                (join, "join", "exports.upload_s3", "cancelled" if failed else "succeeded")
            )
            for step, (job_id, key, kind, node_state) in enumerate(nodes):
                finished = created + timedelta(seconds=5 * (step + 1))
                records.append(flow_record(job_id, kind, key, flow_id, node_state, finished))
            edges += [(flow_id, root, p) for p in parts] + [(flow_id, p, join) for p in parts]
        for f in range(RUNNING_FLOWS):
            created = now - timedelta(minutes=RUNNING_FLOWS - f)
            flow_id = flow_row(cur, f"catalogue sync {f + 1}", "running", created, False)
            ids = next_ids(cur, RUNNING_FLOW_CHILDREN + 2)
            root, children, join = ids[0], ids[1:-1], ids[-1]
            records.append(
                flow_record(root, "reports.daily_sales", "root", flow_id, "succeeded", created)
            )
            done = RUNNING_FLOW_CHILDREN // 2
            for k, child in enumerate(children):
                key = f"child-{k + 1}"
                if k < done:
                    finished = created + timedelta(seconds=k + 1)
                    records.append(
                        flow_record(
                            child, "exports.build_archive", key, flow_id, "succeeded", finished
                        )
                    )
                else:
                    running = k < done + 5
                    jobs.append(
                        flow_job(child, key, flow_id, "running" if running else "available", 0, now)
                    )
            jobs.append(
                flow_job(join, "join", flow_id, "blocked", RUNNING_FLOW_CHILDREN - done, now)
            )
            edges += [(flow_id, root, c) for c in children] + [(flow_id, c, join) for c in children]
        cur.executemany(q.INSERT_FLOW_RECORD, records)
        cur.executemany(q.INSERT_FLOW_JOB, jobs)
        cur.executemany(q.INSERT_FLOW_EDGE, edges)
    return flow_id


def state_of(dead: bool) -> str:
    return "failed" if dead else "succeeded"


def flow_row(
    cur: psycopg.Cursor[Any], name: str, state: str, created: datetime, finished: bool
) -> int:
    cur.execute(
        q.INSERT_FLOW,
        [name, state, Jsonb({}), created, created + timedelta(minutes=2) if finished else None],
    )
    row = cur.fetchone()
    assert row is not None
    return int(row[0])


def next_ids(cur: psycopg.Cursor[Any], n: int) -> list[int]:
    cur.execute(q.NEXT_JOB_IDS, [n])
    return [int(row[0]) for row in cur.fetchall()]


def flow_record(
    job_id: int, kind: str, key: str, flow_id: int, state: str, finished: datetime
) -> tuple[Any, ...]:
    failed = state == "failed"
    started = None if state == "cancelled" else finished - timedelta(seconds=3)
    errors = [
        {
            "attempt": a,
            "class": "botocore.exceptions.ClientError",
            "message": f"upload of part {key} was denied",
            "traceback": "Traceback (most recent call last):\n  ...\n"
            f"botocore.exceptions.ClientError: upload of part {key} was denied",
            "worker": "worker-1:4100",
            "at": (finished - timedelta(seconds=10 * (3 - a))).isoformat(),
        }
        for a in (1, 2, 3)
        if failed
    ]
    return (
        job_id,
        "exports",
        kind,
        Jsonb({"part": key, "flow": flow_id}),
        3 if failed else 0 if state == "cancelled" else 1,
        Jsonb(errors),
        flow_id,
        key,
        finished - timedelta(seconds=4),
        finished - timedelta(seconds=5),
        started,
        state,
        Jsonb({"rows": 1000}) if state == "succeeded" else None,
        finished,
    )


def flow_job(
    job_id: int, key: str, flow_id: int, state: str, pending: int, now: datetime
) -> tuple[Any, ...]:
    running = state == "running"
    return (
        job_id,
        "exports",
        "exports.upload_s3" if key == "join" else "exports.build_archive",
        Jsonb({"part": key, "flow": flow_id}),
        state,
        pending,
        1 if running else 0,
        flow_id,
        key,
        now - timedelta(seconds=20),
        now - timedelta(minutes=5),
        now - timedelta(seconds=10) if running else None,
        "worker-1:4100" if running else None,
        job_id if running else None,
        now + timedelta(seconds=60) if running else None,
        now - timedelta(seconds=2) if running else None,
    )


def roll_up_everything(conninfo: str) -> None:
    """The leader's metrics rollup, run until it has caught up with the whole history."""
    from queue_engine.worker.services.rollup import roll_up

    async def catch_up() -> int:
        passes = 0
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
            while True:
                done = await roll_up(conn, budget=30.0)
                passes += done.passes
                if not done.more:
                    return passes

    started = timer()
    passes = asyncio.run(catch_up())
    log(f"console_pages: metrics rolled up in {passes} passes, {started():.1f} s")
