"""The statements that seed bench/console_data.py's dataset, each a module-level constant.

In INSERT_HISTORY and INSERT_LIVE, `spec` is the queues' table (QUEUES as JSON), `g`
one generated row with a number `g.n` (a customer, an order) and `s` its queue.
"""

from psycopg import sql

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
