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

from bench.harness import BenchEnv, log, timer

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
    for q in QUEUES:
        rows.append(
            {
                "queue": q.name,
                "lo": low,
                "hi": low + q.share,
                "kinds": list(q.kinds),
                "fail": q.fail,
                "max_attempts": q.max_attempts,
                "run_seconds": q.run_seconds,
                "error_classes": [c for c, _ in q.errors],
                "error_messages": [m for _, m in q.errors],
            }
        )
        low += q.share
    rows[-1]["hi"] = 1.0
    return json.dumps(rows)


# --- statements ----------------------------------------------------------------------

# `g.n` is a per-row number (a customer, an order) and `s` the row's queue spec.
_SPEC = """spec AS (
    SELECT * FROM jsonb_to_recordset(%(spec)s::jsonb) AS s(
        queue text, lo float8, hi float8, kinds text[], fail float8, max_attempts int,
        run_seconds float8, error_classes text[], error_messages text[])
)"""

_NAME = """CASE s.queue
        WHEN 'emails' THEN 'Email to user' || g.n || '@example.com'
        WHEN 'webhooks' THEN 'order.paid to account ' || mod(g.n, 5000)
        ELSE '' END"""

_PAYLOAD = """CASE s.queue
        WHEN 'emails' THEN jsonb_build_object('to', 'user' || g.n || '@example.com',
             'template', 'receipt', 'order_id', g.n, 'locale', 'en')
        WHEN 'webhooks' THEN jsonb_build_object('url', 'https://hooks.example.com/' || mod(g.n, 5000),
             'event', 'order.paid', 'delivery_id', 'dlv_' || g.id)
        ELSE jsonb_build_object('account_id', mod(g.n, 5000), 'ref', 'ref_' || g.id,
             'region', CASE WHEN mod(g.n, 3) = 0 THEN 'us' ELSE 'eu' END) END"""

_ERROR_CLASS = "s.error_classes[1 + mod(g.n, cardinality(s.error_classes))]"
_ERROR_MESSAGE = (
    "replace(s.error_messages[1 + mod(g.n, cardinality(s.error_messages))], '{n}', g.n::text)"
)

# One entry per failed attempt, with a traceback of realistic length.
_ERRORS = f"""(SELECT jsonb_agg(jsonb_build_object(
            'attempt', a, 'class', {_ERROR_CLASS}, 'message', {_ERROR_MESSAGE},
            'worker', 'worker-' || (1 + mod(g.id + a, 4)) || ':' || (4100 + mod(g.id, 7)),
            'at', g.finished_at - make_interval(secs => 30 * (t.attempt - a)),
            'traceback', 'Traceback (most recent call last):' || chr(10)
                || '  File "/app/queue_engine/worker/execution.py", line 214, in run_one'
                || chr(10) || '    result = await call(definition, payload, context)' || chr(10)
                || '  File "/app/' || split_part(k.kind, '.', 1) || '/jobs.py", line '
                || (40 + mod(g.n, 200)) || ', in ' || split_part(k.kind, '.', 2) || chr(10)
                || '    response = client.send(request, timeout=10)' || chr(10)
                || '  File "/app/.venv/lib/python3.13/site-packages/client/api.py", line 812, '
                || 'in send' || chr(10) || '    raise error_for(response)' || chr(10)
                || {_ERROR_CLASS} || ': ' || {_ERROR_MESSAGE})
            ORDER BY a)
       FROM generate_series(1, t.attempt - CASE WHEN t.state = 'failed' THEN 0 ELSE 1 END) a)"""

# The history: %(n)s jobs that ended, ids 1..n in finishing order over %(span)s up to
# now. Run and wait times are exponential around each queue's mean.
INSERT_HISTORY = f"""
WITH {_SPEC}
INSERT INTO queue_engine_jobrecord
       (id, queue, kind, name, priority, payload, attempt, max_attempts, errors, group_key,
        run_at, created_at, started_at, state, result, worker, finished_at)
SELECT g.id, s.queue, k.kind, {_NAME},
       CASE WHEN k.kind = 'shop.send_receipt' THEN 5 ELSE 0 END,
       {_PAYLOAD}, t.attempt, s.max_attempts,
       CASE WHEN t.state = 'failed' OR t.attempt > 1 THEN {_ERRORS} ELSE '[]'::jsonb END,
       CASE WHEN s.queue = 'billing' THEN 'acct-' || mod(g.n, 500) END,
       CASE WHEN t.state = 'cancelled' THEN g.finished_at + interval '10 minutes'
            ELSE g.finished_at - make_interval(secs => t.run + t.wait) END,
       CASE WHEN t.state = 'cancelled' THEN g.finished_at - interval '5 minutes'
            ELSE g.finished_at - make_interval(secs => t.run + t.wait + 0.01) END,
       CASE WHEN t.state <> 'cancelled' THEN g.finished_at - make_interval(secs => t.run) END,
       t.state,
       CASE WHEN t.state = 'succeeded'
            THEN jsonb_build_object('ok', true, 'ms', round(t.run * 1000)) END,
       CASE WHEN t.state <> 'cancelled' THEN 'worker-' || (1 + mod(g.id, 4)) || ':' || (4100 + mod(g.id, 7))
            ELSE '' END,
       g.finished_at
  FROM (SELECT i AS id, mod(i * 7919, 100000) AS n, random() AS r, random() AS u,
               random() AS v, random() AS w, random() AS x,
               now() - %(span)s::interval
                     + %(span)s::interval * ((i - 1 + random()) / %(n)s) AS finished_at
          FROM generate_series(1, %(n)s::bigint) AS i) AS g
  JOIN spec s ON g.r >= s.lo AND g.r < s.hi
 CROSS JOIN LATERAL (SELECT s.kinds[1 + mod(g.id, cardinality(s.kinds))] AS kind) AS k
 CROSS JOIN LATERAL (
        SELECT st.state,
               CASE st.state WHEN 'failed' THEN s.max_attempts WHEN 'cancelled' THEN 0
                    ELSE CASE WHEN g.v < 0.04 THEN 2 ELSE 1 END END AS attempt,
               0.01 - ln(1 - g.w) * s.run_seconds AS run,
               -ln(1 - g.x) * 0.8 AS wait
          FROM (SELECT CASE WHEN g.u < s.fail THEN 'failed'
                            WHEN g.u < s.fail + 0.03 THEN 'cancelled'
                            ELSE 'succeeded' END AS state) AS st) AS t
"""

# The live table: %(n)s jobs, about two thirds available (a backlog up to 10 minutes
# old), a quarter scheduled over the next day, the rest running.
INSERT_LIVE = f"""
WITH {_SPEC}
INSERT INTO queue_engine_job
       (queue, kind, name, priority, payload, state, attempt, max_attempts, errors, group_key,
        run_at, created_at, started_at, lease_owner, claim_token, lease_expires_at,
        heartbeat_at, progress, progress_message)
SELECT s.queue, k.kind, {_NAME}, CASE WHEN k.kind = 'shop.send_receipt' THEN 5 ELSE 0 END,
       {_PAYLOAD}, t.state, t.attempt, s.max_attempts,
       CASE WHEN t.attempt > 1 THEN {_ERRORS} ELSE '[]'::jsonb END,
       CASE WHEN s.queue = 'billing' THEN 'acct-' || mod(g.n, 500) END,
       g.run_at, g.run_at - interval '2 seconds',
       CASE WHEN t.state = 'running' THEN g.finished_at END,
       CASE WHEN t.state = 'running' THEN 'worker-' || (1 + mod(g.id, 4)) || ':4100' END,
       CASE WHEN t.state = 'running' THEN g.id END,
       CASE WHEN t.state = 'running' THEN now() + interval '60 seconds' END,
       CASE WHEN t.state = 'running' THEN now() - interval '2 seconds' END,
       CASE WHEN t.state = 'running' AND g.v < 0.5 THEN round(g.w::numeric, 2) END,
       CASE WHEN t.state = 'running' AND g.v < 0.5
            THEN 'batch ' || (1 + (g.w * 20)::int) || ' of 20' ELSE '' END
  FROM (SELECT i AS id, mod(i * 7919, 100000) AS n, r, u, v, w,
               CASE WHEN u < 0.68 THEN now() - make_interval(secs => 600 * w)
                    WHEN u < 0.95 THEN now() + make_interval(secs => 86400 * w)
                    ELSE now() - make_interval(secs => 5 + 60 * w) END AS run_at,
               now() - make_interval(secs => 30 * w) AS finished_at  -- started_at if running
          FROM (SELECT i, random() AS r, random() AS u, random() AS v, random() AS w
                  FROM generate_series(1, %(n)s::bigint) AS i) AS rnd) AS g
  JOIN spec s ON g.r >= s.lo AND g.r < s.hi
 CROSS JOIN LATERAL (SELECT s.kinds[1 + mod(g.id, cardinality(s.kinds))] AS kind) AS k
 CROSS JOIN LATERAL (
        SELECT st.state, CASE WHEN st.state = 'running' AND g.v < 0.1 THEN 2
                              WHEN st.state = 'running' THEN 1 ELSE 0 END AS attempt
          FROM (SELECT CASE WHEN g.u < 0.68 THEN 'available'
                            WHEN g.u < 0.95 THEN 'scheduled'
                            ELSE 'running' END AS state) AS st) AS t
"""

INSERT_QUEUES = """
INSERT INTO queue_engine_queueconfig
       (name, max_concurrency, retain_succeeded, retain_failed, retain_cancelled)
SELECT name, CASE WHEN name IN ('billing', 'reports') THEN 10 END, %(retain)s, %(retain)s,
       %(retain)s
  FROM unnest(%(names)s::varchar[]) AS name
"""

INSERT_GROUP_LIMITS = """
INSERT INTO queue_engine_grouplimit (queue, group_key, max_concurrency)
SELECT 'billing', 'acct-' || i, 2 FROM generate_series(1, 5) AS i
"""

SET_JOB_ID_SEQUENCE = "SELECT setval(pg_get_serial_sequence('queue_engine_job', 'id'), %s)"
NEXT_JOB_IDS = (
    "SELECT nextval(pg_get_serial_sequence('queue_engine_job', 'id')) FROM generate_series(1, %s)"
)
DATABASE_NOW = "SELECT now()"

INSERT_FLOW = """
INSERT INTO queue_engine_flow (name, state, meta, created_at, finished_at)
VALUES (%s, %s, %s, %s, %s) RETURNING id
"""

INSERT_FLOW_RECORD = """
INSERT INTO queue_engine_jobrecord
       (id, queue, kind, name, payload, attempt, max_attempts, errors, flow_id, node_key,
        run_at, created_at, started_at, state, result, worker, finished_at)
VALUES (%s, %s, %s, '', %s, %s, 3, %s, %s, %s, %s, %s, %s, %s, %s, 'worker-1:4100', %s)
"""

INSERT_FLOW_JOB = """
INSERT INTO queue_engine_job
       (id, queue, kind, payload, state, pending_deps, attempt, max_attempts, flow_id, node_key,
        run_at, created_at, started_at, lease_owner, claim_token, lease_expires_at,
        heartbeat_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, 3, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""

INSERT_FLOW_EDGE = """
INSERT INTO queue_engine_flowedge (flow_id, parent_id, child_id) VALUES (%s, %s, %s)
"""

# The job a detail page is measured on: the newest dead billing job (all its attempts'
# errors), with log lines from each attempt.
NEWEST_DEAD_BILLING = """
SELECT id, attempt FROM queue_engine_jobrecord
 WHERE queue = 'billing' AND state = 'failed' ORDER BY id DESC LIMIT 1
"""

INSERT_LOG_LINES = """
INSERT INTO queue_engine_joblog (job_id, attempt, seq, stream, level, at, text)
SELECT %(job)s, 1 + (i - 1) * %(attempts)s / %(n)s, i,
       (ARRAY['stdout', 'stdout', 'log', 'stderr'])[1 + mod(i, 4)],
       CASE WHEN mod(i, 4) = 2 THEN (ARRAY['info', 'warning'])[1 + mod(i, 2)] ELSE '' END,
       now() - make_interval(secs => %(n)s - i),
       CASE mod(i, 4) WHEN 0 THEN 'charging order ' || i || ': amount 1999 EUR'
                  WHEN 1 THEN 'gateway answered in ' || (80 + mod(i, 300)) || ' ms'
                  WHEN 2 THEN 'billing.jobs: retrying card authorisation (try ' || mod(i, 5) || ')'
                  ELSE 'DeprecationWarning: use PaymentIntent.confirm()' END
  FROM generate_series(1, %(n)s) AS i
"""

INSERT_SCHEDULES = """
INSERT INTO queue_engine_schedule
       (name, kind, payload, queue, priority, every, cron, timezone, enabled,
        missed_fire_policy, next_fire_at, last_fire_at, last_job_id, last_error, source)
SELECT 'schedule-' || lpad(i::text, 3, '0'), (%(kinds)s::text[])[1 + mod(i, cardinality(%(kinds)s::text[]))],
       jsonb_build_object('batch', i), NULL, NULL,
       CASE WHEN mod(i, 2) = 0 THEN make_interval(mins => 5 * i) END,
       CASE WHEN mod(i, 2) = 1 THEN mod(i, 60) || ' ' || mod(i, 24) || ' * * *' END,
       CASE WHEN mod(i, 3) = 0 THEN 'Europe/Paris' ELSE 'UTC' END, mod(i, 10) <> 0, 'run_once',
       now() + make_interval(mins => i), now() - make_interval(mins => 60 - i), %(job)s,
       CASE WHEN mod(i, 13) = 0 THEN 'kind ' || i || ' was not registered when it fired' ELSE '' END,
       'code'
  FROM generate_series(1, %(n)s) AS i
"""

INSERT_WORKERS = """
INSERT INTO queue_engine_workerprocess
       (id, host, pid, queues, labels, concurrency, in_flight, is_leader, started_at,
        heartbeat_at)
SELECT 'worker-' || i || ':4100', 'worker-' || i, 4100 + i,
       CASE WHEN i <= 2 THEN '{}'::varchar[] ELSE %(queues)s::varchar[] END,
       CASE WHEN i = 3 THEN '{gpu}'::varchar[] ELSE '{}'::varchar[] END,
       50, CASE WHEN i <= 6 THEN 25 ELSE 0 END, i = 1, now() - interval '3 days',
       now() - CASE WHEN i <= 6 THEN interval '2 seconds' ELSE interval '3 minutes' END
  FROM generate_series(1, 8) AS i
"""

INSERT_AUDIT = """
INSERT INTO queue_engine_auditevent (at, actor, action, target_type, target, count, details)
SELECT now() - %(span)s::interval * (1 - i::float8 / %(n)s),
       (ARRAY['alice', 'bob', 'carol', 'system', 'cli'])[1 + mod(i, 5)], a.action, a.target_type,
       CASE a.target_type WHEN 'job' THEN (1 + mod(i * 7919, %(max_id)s))::text
                          WHEN 'queue' THEN (%(queues)s::text[])[1 + mod(i, 8)]
                          ELSE 'schedule-' || lpad((1 + mod(i, 40))::text, 3, '0') END,
       CASE WHEN mod(i, 7) = 0 THEN 1 + mod(i, 500) ELSE 1 END, '{}'::jsonb
  FROM generate_series(1, %(n)s) AS i
 CROSS JOIN LATERAL (
        SELECT (ARRAY['retry', 'cancel', 'redrive', 'remove', 'pause', 'resume',
                      'schedule_run_now'])[1 + mod(i, 7)] AS action) AS pick
 CROSS JOIN LATERAL (
        SELECT pick.action,
               CASE WHEN pick.action IN ('pause', 'resume') THEN 'queue'
                    WHEN starts_with(pick.action, 'schedule') THEN 'schedule'
                    ELSE 'job' END AS target_type) AS a
"""

VACUUM_ANALYZE = sql.SQL("VACUUM (ANALYZE) {}")
VACUUM_FULL_METRICS = "VACUUM (FULL, ANALYZE) queue_engine_metricbucket, queue_engine_rollupstate"


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
    names = [q.name for q in QUEUES]
    flow_records = DONE_FLOWS * (DONE_FLOW_PARTS + 2) + RUNNING_FLOWS * (
        1 + RUNNING_FLOW_CHILDREN // 2
    )
    main = history - flow_records
    with env.connect() as conn:
        truncate(conn)
        conn.execute(INSERT_QUEUES, {"names": names, "retain": RETAIN})
        conn.execute(INSERT_GROUP_LIMITS)
        conn.execute("SELECT setseed(0.42)")
        conn.execute(INSERT_HISTORY, {"spec": spec, "n": main, "span": SPAN})
        conn.execute(SET_JOB_ID_SEQUENCE, [main])
        log(f"console_pages: {main:,} history rows in {started():.1f} s")
        flow = seed_flows(conn)
        conn.execute(INSERT_LIVE, {"spec": spec, "n": LIVE})
        dead_job, attempts = one(conn, NEWEST_DEAD_BILLING)
        conn.execute(INSERT_LOG_LINES, {"job": dead_job, "attempts": attempts, "n": LOG_LINES})
        kinds = [k for q in QUEUES for k in q.kinds]
        conn.execute(INSERT_SCHEDULES, {"kinds": kinds, "n": SCHEDULES, "job": main})
        conn.execute(INSERT_WORKERS, {"queues": names[2:5]})
        conn.execute(
            INSERT_AUDIT, {"n": AUDIT_EVENTS, "span": SPAN, "max_id": main, "queues": names}
        )
        newest_id = one(conn, "SELECT max(id) FROM queue_engine_job")[0]
    # Vacuumed first: until then the BRIN index on finished_at has no summary of the new
    # rows' pages, and every time range the rollup reads would scan the whole table.
    vacuum_analyze(env, TABLES)
    roll_up_everything(env.conninfo)
    # The catch-up wrote 30 days of minute buckets and pruned all but the last 3 days:
    # compacted, the table is what a system that rolled up as it went holds (a tenth).
    with env.connect() as conn:
        conn.execute(VACUUM_FULL_METRICS)
    log(f"console_pages: seeded {history:,} history rows and the rest in {started():.1f} s")
    return Seeded(history, newest_id, main // 2, dead_job, flow)


def vacuum_analyze(env: BenchEnv, tables: Sequence[str]) -> None:
    with env.connect() as conn:
        for table in tables:
            conn.execute(VACUUM_ANALYZE.format(sql.Identifier(table)))


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
    now: datetime = one(conn, DATABASE_NOW)[0]
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
        cur.executemany(INSERT_FLOW_RECORD, records)
        cur.executemany(INSERT_FLOW_JOB, jobs)
        cur.executemany(INSERT_FLOW_EDGE, edges)
    return flow_id


def state_of(dead: bool) -> str:
    return "failed" if dead else "succeeded"


def flow_row(
    cur: psycopg.Cursor[Any], name: str, state: str, created: datetime, finished: bool
) -> int:
    cur.execute(
        INSERT_FLOW,
        [name, state, Jsonb({}), created, created + timedelta(minutes=2) if finished else None],
    )
    row = cur.fetchone()
    assert row is not None
    return int(row[0])


def next_ids(cur: psycopg.Cursor[Any], n: int) -> list[int]:
    cur.execute(NEXT_JOB_IDS, [n])
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
