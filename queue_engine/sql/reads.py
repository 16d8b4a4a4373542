"""The read side (`queue_engine.reads`): counts, metric series, job lists, flow graphs.

Nothing here counts a whole table: counts stop at a cap, series read the rollup (plus
the few rows it has not seen yet), lists page by id. Optional filters are written
`(%(x)s IS NULL OR ...)`: the planner folds them away for the values given, so each
query keeps to the index its filters call for.
"""

from queue_engine.sql.fragments import BUCKET_ORIGIN, MINUTE_FIGURES, NOT_REUSED, WAIT_AND_RUN

# The queues the counts cover (one, or all), in name order.
QUEUES = """
SELECT name, paused FROM queue_engine_queueconfig
 WHERE (%(queue)s::varchar IS NULL OR name = %(queue)s)
 ORDER BY name
"""


# The live table holds only jobs that can still run, usually few: its first
# %(scan)s + 1 rows in heap order (a Seq Scan that stops there). When that is the whole
# table, these are the exact counts of every queue; otherwise lower bounds.
LIVE_COUNTS = """
SELECT queue, state, count(*)
  FROM (SELECT queue, state FROM queue_engine_job LIMIT %(scan)s + 1) AS probe
 GROUP BY 1, 2
"""


# A larger live table (a backlog): per queue, available, running and blocked jobs
# counted up to %(cap)s + 1 through their partial indexes (qe_job_claim,
# qe_job_running_group, qe_job_blocked);
# the states are literals so that the planner can use those indexes.
CAPPED_LIVE_COUNTS = """
SELECT c.name,
       (SELECT count(*) FROM (SELECT 1 FROM queue_engine_job j
                               WHERE j.queue = c.name AND j.state = 'available'
                               LIMIT %(cap)s + 1) AS capped),
       (SELECT count(*) FROM (SELECT 1 FROM queue_engine_job j
                               WHERE j.queue = c.name AND j.state = 'running'
                               LIMIT %(cap)s + 1) AS capped),
       (SELECT count(*) FROM (SELECT 1 FROM queue_engine_job j
                               WHERE j.queue = c.name AND j.state = 'blocked'
                               LIMIT %(cap)s + 1) AS capped)
  FROM queue_engine_queueconfig c
 WHERE (%(queue)s::varchar IS NULL OR c.name = %(queue)s)
"""


# Each queue's longest-waiting available job, read through the claim index one priority
# at a time (a loose scan: a probe or two per distinct priority, however many jobs
# wait), not by reading every available job to take the minimum.
OLDEST_AVAILABLE = """
SELECT c.name, (
    WITH RECURSIVE p(priority) AS (
        (SELECT j.priority FROM queue_engine_job j
          WHERE j.state = 'available' AND j.queue = c.name
          ORDER BY j.priority DESC LIMIT 1)
        UNION ALL
        SELECT (SELECT j.priority FROM queue_engine_job j
                 WHERE j.state = 'available' AND j.queue = c.name
                   AND j.priority < p.priority
                 ORDER BY j.priority DESC LIMIT 1)
          FROM p WHERE p.priority IS NOT NULL
    )
    SELECT min((SELECT j.run_at FROM queue_engine_job j
                 WHERE j.state = 'available' AND j.queue = c.name
                   AND j.priority = p.priority
                 ORDER BY j.priority DESC, j.run_at LIMIT 1))
      FROM p WHERE p.priority IS NOT NULL)
  FROM queue_engine_queueconfig c
 WHERE (%(queue)s::varchar IS NULL OR c.name = %(queue)s)
"""


# Scheduled jobs of every queue, at most %(scan)s + 1 (no index has their queue: the
# partial index on run_at when they are few, else a Seq Scan that finds them soon).
CAPPED_SCHEDULED_COUNTS = """
SELECT queue, count(*)
  FROM (SELECT queue FROM queue_engine_job WHERE state = 'scheduled'
         LIMIT %(scan)s + 1) AS capped
 GROUP BY 1
"""


# Every (queue, state) of the live table estimated from a block sample of about
# %(sample)s rows (TABLESAMPLE SYSTEM): its share of the sample times the table's rows,
# estimated as the planner does (current pages times rows a page at the last ANALYZE,
# 40 before the first one).
LIVE_ESTIMATES = """
WITH size AS (
    SELECT pg_relation_size(c.oid) / current_setting('block_size')::float8
           * COALESCE(c.reltuples / NULLIF(c.relpages, 0), 40) AS rows
      FROM pg_class c WHERE c.oid = 'queue_engine_job'::regclass
), sample AS (
    SELECT queue, state, count(*) AS n
      FROM queue_engine_job TABLESAMPLE SYSTEM ((
           SELECT LEAST(100, 100.0 * %(sample)s / GREATEST(rows, 1))::float4 FROM size))
     GROUP BY 1, 2
)
SELECT queue, state, round(n * (SELECT rows FROM size) / sum(n) OVER ())::bigint FROM sample
"""


# History per queue and state, each count stopping at %(cap)s + 1 (an index-only
# range of the (queue, state, id) index, never the whole table).
CAPPED_HISTORY_COUNTS = """
SELECT c.name, s.state,
       (SELECT count(*) FROM (SELECT 1 FROM queue_engine_jobrecord r
                               WHERE r.queue = c.name AND r.state = s.state
                               LIMIT %(cap)s + 1) AS capped)
  FROM queue_engine_queueconfig c
 CROSS JOIN unnest(ARRAY['succeeded', 'failed', 'cancelled']::varchar[]) AS s(state)
 WHERE (%(queue)s::varchar IS NULL OR c.name = %(queue)s)
"""


# What ended within each queue's retention windows, by the hourly rollup: what
# the history holds once the collector has caught up (to within an hour).
ESTIMATED_HISTORY_COUNTS = f"""
SELECT b.queue,
       sum(b.succeeded) FILTER (WHERE b.bucket >= date_bin('1 hour',
           now() - make_interval(secs => c.retain_succeeded), {BUCKET_ORIGIN})),
       sum(b.failed) FILTER (WHERE b.bucket >= date_bin('1 hour',
           now() - make_interval(secs => c.retain_failed), {BUCKET_ORIGIN})),
       sum(b.cancelled) FILTER (WHERE b.bucket >= date_bin('1 hour',
           now() - make_interval(secs => c.retain_cancelled), {BUCKET_ORIGIN}))
  FROM queue_engine_queueconfig c
  JOIN queue_engine_metricbucket b
    ON b.size = 3600 AND b.queue = c.name
   AND b.bucket >= date_bin('1 hour', now() - make_interval(
           secs => GREATEST(c.retain_succeeded, c.retain_failed, c.retain_cancelled)), {BUCKET_ORIGIN})
 WHERE c.name = ANY(%(queues)s::varchar[])
 GROUP BY b.queue
"""


# The rollup's watermark and the database clock, read together.
ROLLED_UP_TO = "SELECT rolled_up_to, now() FROM queue_engine_rollupstate WHERE name = 'metrics'"


_BUCKET_COLUMNS = """queue, kind, bucket AS t, succeeded, failed, cancelled, retried, timed,
           wait_sum, run_sum, wait_p50, wait_p95, run_p50, run_p95"""


_BUCKET_FILTERS = """(%(queues)s::varchar[] IS NULL OR queue = ANY(%(queues)s::varchar[]))
       AND (%(kind)s::varchar IS NULL OR kind = %(kind)s)"""


# What ended from %(start)s to %(end)s, per queue, kind and bucket (t), in the queues
# %(queues)s (NULL: all) and of %(kind)s (NULL: all), stitched from three disjoint
# sources: hour buckets before %(hours_until)s, minute buckets up to the rollup's
# watermark, and history rows after it (the live tail, per minute). The tail is read by
# time alone (the BRIN index): given the queue too, the planner would AND the BRIN range
# with every history row of the queue from the (queue, state, id) index, reading a
# large share of the history for a tail of a few rows.
_STITCHED = f"""
WITH tail AS MATERIALIZED (
    SELECT finished_at, queue, kind, state, attempt, started_at, run_at
      FROM queue_engine_jobrecord
     WHERE finished_at >= %(raw_from)s AND finished_at < %(end)s AND {NOT_REUSED}
), src AS (
    SELECT {_BUCKET_COLUMNS}
      FROM queue_engine_metricbucket
     WHERE size = 3600 AND bucket >= %(start)s AND bucket < %(hours_until)s
       AND {_BUCKET_FILTERS}
    UNION ALL
    SELECT {_BUCKET_COLUMNS}
      FROM queue_engine_metricbucket
     WHERE size = 60 AND bucket >= %(minutes_from)s AND bucket < %(minutes_until)s
       AND {_BUCKET_FILTERS}
    UNION ALL
    SELECT queue, kind, date_bin('1 minute', finished_at, {BUCKET_ORIGIN}),
           {MINUTE_FIGURES}
      FROM (SELECT queue, kind, finished_at, state, attempt,
                   {WAIT_AND_RUN}
              FROM tail
             WHERE {_BUCKET_FILTERS}) AS r
     GROUP BY 1, 2, 3"""


# One point per step from %(start)s to %(end)s, zero-filled, for each of %(queues)s
# (or one series of every queue together when it is NULL), from _STITCHED. Counts and
# sums add up exactly; percentiles of a point that spans several buckets are the
# timed-weighted means of the buckets' percentiles.
SERIES = f"""{_STITCHED}
), binned AS (
    SELECT CASE WHEN %(queues)s::varchar[] IS NOT NULL THEN queue END AS queue,
           date_bin(make_interval(secs => %(step)s), t, {BUCKET_ORIGIN}) AS slot,
           sum(succeeded) AS succeeded, sum(failed) AS failed, sum(cancelled) AS cancelled,
           sum(retried) AS retried, sum(timed) AS timed,
           sum(wait_sum) AS wait_sum, sum(run_sum) AS run_sum,
           sum(wait_p50 * timed) AS wait_p50, sum(wait_p95 * timed) AS wait_p95,
           sum(run_p50 * timed) AS run_p50, sum(run_p95 * timed) AS run_p95
      FROM src
     GROUP BY 1, 2
)
SELECT q.queue, s.slot,
       COALESCE(b.succeeded, 0)::bigint, COALESCE(b.failed, 0)::bigint,
       COALESCE(b.cancelled, 0)::bigint, COALESCE(b.retried, 0)::bigint,
       b.wait_sum / NULLIF(b.timed, 0), b.wait_p50 / NULLIF(b.timed, 0),
       b.wait_p95 / NULLIF(b.timed, 0),
       b.run_sum / NULLIF(b.timed, 0), b.run_p50 / NULLIF(b.timed, 0),
       b.run_p95 / NULLIF(b.timed, 0)
  FROM unnest(COALESCE(%(queues)s::varchar[], '{{NULL}}'::varchar[])) AS q(queue)
 CROSS JOIN generate_series(%(start)s::timestamptz,
                            %(end)s::timestamptz - make_interval(secs => %(step)s),
                            make_interval(secs => %(step)s)) AS s(slot)
  LEFT JOIN binned b ON b.slot = s.slot AND b.queue IS NOT DISTINCT FROM q.queue
 ORDER BY q.queue, s.slot
"""


# Per kind, over the same sources: the jobs that ended dead, the failed attempts that
# ran again, and all that ended; the kinds with a failure, most dead first.
KIND_FAILURES = f"""{_STITCHED}
)
SELECT kind, sum(failed)::bigint, sum(retried)::bigint,
       sum(succeeded + failed + cancelled)::bigint
  FROM src
 GROUP BY kind
HAVING sum(failed) > 0 OR sum(retried) > 0
 ORDER BY 2 DESC, 3 DESC, kind
 LIMIT %(limit)s
"""


# The newest id, live or ended (two index lookups).
MAX_JOB_ID = """
SELECT GREATEST((SELECT max(id) FROM queue_engine_job),
                (SELECT max(id) FROM queue_engine_jobrecord), 0)
"""


# The jobs list's filters over either table; `{worker}` is the column naming the worker
# that ran the job last (lease_owner live, worker in the history). The error filters read
# the last error only: a job's last failure is what it is listed and grouped by.
_FILTERS = """(%(queue)s::varchar IS NULL OR queue = %(queue)s)
   AND (%(state)s::varchar IS NULL OR state = %(state)s)
   AND (%(kind)s::varchar IS NULL OR kind = %(kind)s)
   AND (%(text)s::text IS NULL OR COALESCE(NULLIF(name, ''), kind) ILIKE %(text)s)
   AND (%(payload)s::jsonb IS NULL OR payload @> %(payload)s::jsonb)
   AND (%(meta)s::jsonb IS NULL OR meta @> %(meta)s::jsonb)
   AND (%(error_class)s::text IS NULL
        OR COALESCE(errors->-1->>'class', '') = %(error_class)s)
   AND (%(message)s::text IS NULL OR errors->-1->>'message' ILIKE %(message)s)
   AND (%(worker)s::text IS NULL OR {worker} = %(worker)s OR {worker} LIKE %(worker_host)s)
   AND (%(group)s::varchar IS NULL OR group_key = %(group)s)"""

_LIVE_FILTERS = _FILTERS.format(worker="lease_owner")
_HISTORY_FILTERS = _FILTERS.format(worker="worker")


_LIVE_COLUMNS = """id, queue, kind, name, state, priority, attempt, max_attempts, run_at,
       created_at, started_at, NULL::timestamptz AS finished_at, progress,
       left(errors->-1->>'message', 300) AS last_error"""


_HISTORY_COLUMNS = """id, queue, kind, name, state, priority, attempt, max_attempts, run_at,
       created_at, started_at, finished_at, progress,
       left(errors->-1->>'message', 300) AS last_error"""


# Live jobs (time range on created_at), one page older than %(before)s, newest first.
LIVE_OLDER = f"""
SELECT {_LIVE_COLUMNS} FROM queue_engine_job
 WHERE {_LIVE_FILTERS}
   AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
   AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s)
   AND (%(before)s::bigint IS NULL OR id < %(before)s)
   AND (%(floor)s::bigint IS NULL OR id >= %(floor)s)
 ORDER BY id DESC LIMIT %(limit)s
"""


# Live jobs, one page newer than %(after)s, oldest first (the caller reverses it).
LIVE_NEWER = f"""
SELECT {_LIVE_COLUMNS} FROM queue_engine_job
 WHERE {_LIVE_FILTERS}
   AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
   AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s)
   AND id > %(after)s
   AND (%(ceiling)s::bigint IS NULL OR id < %(ceiling)s)
 ORDER BY id LIMIT %(limit)s
"""


# Ended jobs (time range on finished_at), one page older than %(before)s.
HISTORY_OLDER = f"""
SELECT {_HISTORY_COLUMNS} FROM queue_engine_jobrecord
 WHERE {_HISTORY_FILTERS}
   AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s)
   AND (%(until)s::timestamptz IS NULL OR finished_at < %(until)s)
   AND (%(before)s::bigint IS NULL OR id < %(before)s)
   AND (%(floor)s::bigint IS NULL OR id >= %(floor)s)
 ORDER BY id DESC LIMIT %(limit)s
"""


# The page after `after` among ended jobs, oldest first (the list then shows it newest
# first).
HISTORY_NEWER = f"""
SELECT {_HISTORY_COLUMNS} FROM queue_engine_jobrecord
 WHERE {_HISTORY_FILTERS}
   AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s)
   AND (%(until)s::timestamptz IS NULL OR finished_at < %(until)s)
   AND id > %(after)s
   AND (%(ceiling)s::bigint IS NULL OR id < %(ceiling)s)
 ORDER BY id LIMIT %(limit)s
"""


# The same pages for a time range far from now: the rows that ended in the range
# are read first through the BRIN index on finished_at (the CTE keeps the planner
# from walking the whole primary key from the newest id instead), then ordered.
_IN_TIME_RANGE = f"""
WITH in_range AS MATERIALIZED (
    SELECT {_HISTORY_COLUMNS} FROM queue_engine_jobrecord
     WHERE finished_at >= %(since)s AND finished_at < %(until)s
       AND {_HISTORY_FILTERS}
)
SELECT * FROM in_range
 WHERE true"""


# The page before `before` among jobs that ended in the time range, bounded below by
# `floor` (the range's first id): the finished_at index finds the range, ids page it.
HISTORY_OLDER_IN_TIME_RANGE = f"""{_IN_TIME_RANGE}
   AND (%(before)s::bigint IS NULL OR id < %(before)s)
   AND (%(floor)s::bigint IS NULL OR id >= %(floor)s)
 ORDER BY id DESC LIMIT %(limit)s
"""


# The page after `after` among jobs that ended in the time range, below `ceiling`.
HISTORY_NEWER_IN_TIME_RANGE = f"""{_IN_TIME_RANGE}
   AND id > %(after)s
   AND (%(ceiling)s::bigint IS NULL OR id < %(ceiling)s)
 ORDER BY id LIMIT %(limit)s
"""


# The jobs list's live jobs by state under its filters (%(state)s NULL), over the first
# %(scan)s + 1 rows of the live table only; the last column counts the rows read, to tell
# whether that was the whole table.
FILTERED_LIVE_COUNTS = f"""
SELECT state, count(*) FILTER (WHERE {_LIVE_FILTERS}
           AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)),
       count(*)
  FROM (SELECT * FROM queue_engine_job LIMIT %(scan)s + 1) AS probe
 GROUP BY state
"""


# One ended state's jobs under the list's filters, counted up to %(cap)s + 1 (through the
# history's queue, kind and dead-letter error indexes, within the state's partitions).
FILTERED_HISTORY_COUNT = f"""
SELECT count(*) FROM (
    SELECT 1 FROM queue_engine_jobrecord WHERE {_HISTORY_FILTERS} LIMIT %(cap)s + 1
) AS found
"""


# The console's statement timeout for the enclosing transaction only (is_local).
STATEMENT_TIMEOUT = "SELECT set_config('statement_timeout', %s, true)"


# ... and for the rest of a console request (is_local false), JIT off as well: it
# compiles any plan its estimate calls expensive, which a console query over a big
# table's guessed row counts can be, and compiling takes longer than these queries
# run (the workers turn it off for the same reason, worker/reconnecting.py).
CONSOLE_SESSION = (
    "SELECT set_config('statement_timeout', %s, false), set_config('jit', 'off', false)"
)


# A console connection's session back to the server's defaults.
CONSOLE_SESSION_RESET = ("RESET statement_timeout", "RESET jit")


# A page of flows, newest first, older than %(before)s (or newer than %(after)s, oldest
# first: the caller reverses). Name matches inside (ILIKE); time bounds the creation.
_FLOW_TEXT_TIME = """(%(text)s::text IS NULL OR name ILIKE %(text)s)
   AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
   AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s)"""
_FLOW_FILTERS = f"""(%(state)s::varchar IS NULL OR state = %(state)s)
   AND {_FLOW_TEXT_TIME}"""


# The flows list's tabs: per state, the flows the other filters match, each count
# stopping at %(cap)s + 1 (the (state, id) index, never the whole table).
FLOW_TAB_COUNTS = f"""
SELECT s.state, (SELECT count(*) FROM (SELECT 1 FROM queue_engine_flow
                                        WHERE state = s.state AND {_FLOW_TEXT_TIME}
                                        LIMIT %(cap)s + 1) AS capped)
  FROM unnest(%(states)s::varchar[]) AS s(state)
"""


# The page of flows before `before`, newest first.
FLOWS_OLDER = f"""
SELECT id, name, state, rerun_of, created_at, finished_at, removed_nodes FROM queue_engine_flow
 WHERE {_FLOW_FILTERS} AND (%(before)s::bigint IS NULL OR id < %(before)s)
 ORDER BY id DESC LIMIT %(limit)s
"""


# The page of flows after `after`, oldest first.
FLOWS_NEWER = f"""
SELECT id, name, state, rerun_of, created_at, finished_at, removed_nodes FROM queue_engine_flow
 WHERE {_FLOW_FILTERS} AND id > %(after)s
 ORDER BY id LIMIT %(limit)s
"""


# Node counts by state for a page of flows (both partial flow_id indexes).
FLOW_STATE_COUNTS = """
SELECT flow_id, state, count(*) FROM (
    SELECT flow_id, state FROM queue_engine_job WHERE flow_id = ANY(%(flows)s)
    UNION ALL
    SELECT flow_id, state FROM queue_engine_jobrecord WHERE flow_id = ANY(%(flows)s)
) nodes GROUP BY flow_id, state
"""


_NODE_COLUMNS = """id, COALESCE(node_key, id::text), kind, name, queue, state, attempt,
       max_attempts, created_at, started_at, {finished}, progress, progress_message,
       left(errors->-1->>'message', 300), {output},
       (meta->'reused_from'->>'flow')::bigint, (meta->>'spawned_by')::bigint,
       meta->'upstream'"""


# A node's result when small; a big one is only announced (the job page shows it).
_NODE_OUTPUT = """CASE WHEN pg_column_size(result) <= 4096 THEN result END,
       pg_column_size(result)"""


# A flow's nodes in one snapshot (a node moving from live to history is seen once),
# lowest id first, at most %(limit)s.
FLOW_NODES = f"""
SELECT * FROM (
    SELECT {_NODE_COLUMNS.format(finished="NULL::timestamptz", output="NULL::jsonb, NULL::int")}
      FROM queue_engine_job WHERE flow_id = %(flow)s
    UNION ALL
    SELECT {_NODE_COLUMNS.format(finished="finished_at", output=_NODE_OUTPUT)}
      FROM queue_engine_jobrecord WHERE flow_id = %(flow)s
) nodes ORDER BY id LIMIT %(limit)s
"""


# A flow graph's edges among its first nodes (ids up to `upto`), in insertion order.
FLOW_GRAPH_EDGES = """
SELECT parent_id, child_id, dynamic FROM queue_engine_flowedge
 WHERE flow_id = %(flow)s AND parent_id <= %(upto)s AND child_id <= %(upto)s
 ORDER BY id
"""


# A job's parents and children in its flow, with their keys and states.
FLOW_LINKS = """
WITH e AS (
    (SELECT 'parent' AS rel, parent_id AS id, dynamic FROM queue_engine_flowedge
      WHERE child_id = %(job)s ORDER BY parent_id LIMIT %(limit)s)
    UNION ALL
    (SELECT 'child', child_id, dynamic FROM queue_engine_flowedge
      WHERE parent_id = %(job)s ORDER BY child_id LIMIT %(limit)s)
)
SELECT e.rel, e.id, COALESCE(j.node_key, r.node_key, e.id::text), COALESCE(j.name, r.name, ''),
       COALESCE(j.kind, r.kind, ''), COALESCE(j.state, r.state, 'removed'), e.dynamic
  FROM e
  LEFT JOIN queue_engine_job j ON j.id = e.id
  LEFT JOIN queue_engine_jobrecord r ON r.id = e.id
 ORDER BY e.rel DESC, e.id
"""


# One flow's own row, for its graph.
FLOW_ROW = """
SELECT id, name, state, rerun_of, created_at, finished_at, removed_nodes
  FROM queue_engine_flow WHERE id = %s
"""


# Dead jobs grouped by queue, kind and last error class, over the newest %(scan)s only.
DEAD_GROUPS = """
SELECT queue, kind, COALESCE(errors->-1->>'class', '') AS error_class, count(*) AS n,
       max(id) AS last_id, max(finished_at) AS last_at,
       (array_agg(left(errors->-1->>'message', 300) ORDER BY id DESC))[1] AS last_message
  FROM (SELECT id, queue, kind, errors, finished_at FROM queue_engine_jobrecord
         WHERE state = 'failed' ORDER BY id DESC LIMIT %(scan)s) AS r
 GROUP BY 1, 2, 3
 ORDER BY max(id) DESC
"""


# The class of a job's last error ('' when it has none), for grouping failures.
LAST_ERROR_CLASS = "COALESCE(errors->-1->>'class', '')"


# The start of a job's last error message, as lists show it.
LAST_ERROR_MESSAGE = "left(errors->-1->>'message', 300)"
