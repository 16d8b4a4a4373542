"""Retention (deleting ended jobs past their window) and the metrics rollup."""

from queue_engine.sql.fragments import (
    BUCKET_ORIGIN,
    MINUTE_COUNTS,
    MINUTE_PERCENTILES,
    NOT_REUSED,
    WAIT_AND_RUN,
)
from queue_engine.sql.history import emptied_flows

# Each queue's retention windows, in seconds per ended state.
RETENTION_WINDOWS = """
SELECT name, retain_succeeded, retain_failed, retain_cancelled
  FROM queue_engine_queueconfig
 ORDER BY name
"""


# The end of a queue's window for one state: rows that ended before it go, except
# those the metrics rollup may still read (within a minute of its watermark, or after).
# NULL, so that nothing goes, until the rollup has a watermark: LEAST alone would
# skip a NULL watermark and delete rows the rollup never counted.
_RETENTION_CUTOFF = """(SELECT LEAST(now() - make_interval(secs => %(keep)s),
                         rolled_up_to - interval '1 minute')
          FROM queue_engine_rollupstate
         WHERE name = 'metrics' AND rolled_up_to IS NOT NULL)"""


# The finish time before which a state's rows may go: its window ago, and never past
# what the metrics rollup has counted.
RETENTION_CUTOFF = f"SELECT {_RETENTION_CUTOFF}"


# One batch of a queue's ended jobs of one state that are past the cutoff (and,
# when given, ended after %(since)s: older ones were swept already), with their
# log lines, steps and unconsumed signals, and the ended flows they were the last nodes of, from `table`: a state's part of the history, or its default
# leaf (queue_engine.schema.partitions says which). Locked rows (being redriven) are skipped.
# No ORDER BY: finished_at has a BRIN index, which cannot sort, and any expired rows
# will do.
def delete_expired_batch(table: str) -> str:
    return f"""
WITH doomed AS (
    SELECT id, flow_id FROM {table}
     WHERE queue = %(queue)s AND state = %(state)s
       AND finished_at < {_RETENTION_CUTOFF}
       AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s)
       -- A running flow still needs its ended nodes: their outputs, for the children
       -- still to run. They go once the flow has ended.
       AND (flow_id IS NULL OR NOT EXISTS (
                SELECT 1 FROM queue_engine_flow f WHERE f.id = flow_id AND f.state = 'running'))
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), logs AS (
    DELETE FROM queue_engine_joblog l USING doomed WHERE l.job_id = doomed.id
), steps AS (
    DELETE FROM queue_engine_jobstep s USING doomed WHERE s.job_id = doomed.id
), mail AS (
    DELETE FROM queue_engine_jobsignal m USING doomed WHERE m.job_id = doomed.id
), {emptied_flows("SELECT flow_id FROM doomed", "r.id IN (SELECT id FROM doomed)")}
DELETE FROM {table} r USING doomed WHERE r.id = doomed.id
RETURNING r.id
"""


# The rollup's watermark row, created once.
ENSURE_ROLLUP_STATE = """
INSERT INTO queue_engine_rollupstate (name, rolled_up_to) VALUES ('metrics', NULL)
ON CONFLICT (name) DO NOTHING
"""


# The watermark, locked for the rollup's transaction, and the database clock.
LOCK_ROLLUP_STATE = """
SELECT rolled_up_to, now() FROM queue_engine_rollupstate WHERE name = 'metrics' FOR UPDATE
"""


# Where a first rollup starts.
OLDEST_FINISHED = "SELECT min(finished_at) FROM queue_engine_jobrecord"


# Move the watermark: everything that finished before it is in the buckets.
SET_ROLLED_UP_TO = """
UPDATE queue_engine_rollupstate SET rolled_up_to = %s WHERE name = 'metrics'
"""


# Buckets of one size in [start, end), about to be recomputed in the same transaction.
DELETE_BUCKETS = """
DELETE FROM queue_engine_metricbucket
 WHERE size = %(size)s AND bucket >= %(start)s AND bucket < %(end)s
"""


def _group_counts(start: str, end: str) -> str:
    """The counts and sums per queue and kind of the history rows that finished in
    [start, end) (SQL expressions), in the metric bucket's column order."""
    return f"""SELECT queue, kind, {MINUTE_COUNTS}, count(*) FILTER (WHERE rescues > 0)
  FROM (SELECT queue, kind, state, attempt, rescues,
               {WAIT_AND_RUN}
          FROM queue_engine_jobrecord
         WHERE finished_at >= {start} AND finished_at < {end} AND {NOT_REUSED}) r
 GROUP BY queue, kind"""


# Minute buckets' counts and sums recomputed from the history rows that finished in
# [start, end), with the same arithmetic as the live tail of reads.SERIES
# (fragments.MINUTE_FIGURES); their percentiles come next (SET_MINUTE_PERCENTILES). One
# minute at a time, grouped by queue and kind only: the planner knows those columns'
# few values and groups in a small hash table. Grouped by a computed minute as well, it
# expects a group per row and sorts every row instead, on disk at a high rate, while
# the workers' commits wait on the same disk.
INSERT_MINUTE_COUNTS = f"""
INSERT INTO queue_engine_metricbucket
       (size, bucket, queue, kind, succeeded, failed, cancelled, retried, timed,
        wait_sum, run_sum, rescued)
SELECT 60, m.minute, g.*
  FROM generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '1 minute',
                       interval '1 minute') AS m(minute)
 CROSS JOIN LATERAL ({_group_counts("m.minute", "m.minute + interval '1 minute'")}) g
RETURNING bucket, queue, kind, timed
"""


# The wait and run percentiles of the minute buckets in [start, end) that have timed
# rows, from a sample of at most about rollup.SAMPLE rows each: a row is in it when a
# hash of its id, in [0, 2^20), is below the bucket's `keep` (2^20 keeps every row, so
# a bucket of up to SAMPLE rows has exact percentiles). Sorting a sample rather than
# every row keeps a busy minute's pass short; the sample is the same at every pass.
# `most`, the largest `keep`, drops most unsampled rows in the scan, before the join.
# MATERIALIZED: computed once, whatever join the planner picks for the UPDATE (with
# stale statistics it expects one row and would repeat the aggregate per bucket).
SET_MINUTE_PERCENTILES = f"""
WITH p (minute, queue, kind, wait_p50, wait_p95, run_p50, run_p95) AS MATERIALIZED (
    SELECT s.minute, s.queue, s.kind, {MINUTE_PERCENTILES}
      FROM (SELECT id, finished_at, queue, kind,
                   {WAIT_AND_RUN}
              FROM queue_engine_jobrecord
             WHERE finished_at >= %(start)s AND finished_at < %(end)s
               AND started_at IS NOT NULL
               AND (hashint8(id) & 1048575) < %(most)s) r
      JOIN unnest(%(minutes)s::timestamptz[], %(queues)s::varchar[],
                  %(kinds)s::varchar[], %(keep)s::int[]) AS s(minute, queue, kind, keep)
        ON s.minute = date_bin('1 minute', r.finished_at, {BUCKET_ORIGIN})
       AND s.queue = r.queue AND s.kind = r.kind
     WHERE (hashint8(r.id) & 1048575) < s.keep
     GROUP BY 1, 2, 3
)
UPDATE queue_engine_metricbucket b
   SET wait_p50 = p.wait_p50, wait_p95 = p.wait_p95, run_p50 = p.run_p50, run_p95 = p.run_p95
  FROM p
 WHERE b.size = 60 AND b.bucket = p.minute AND b.queue = p.queue AND b.kind = p.kind
"""


# The rollup's steady pass reads a minute in slices (worker/services/rollup_slices.py):
# a slice's counts and sums per queue and kind, as INSERT_MINUTE_COUNTS computes them;
SLICE_COUNTS = _group_counts("%(start)s", "%(end)s")


# ... the wait and run of a slice's rows that may be in a bucket's sample (the row hash
# below the largest `keep`: SET_MINUTE_PERCENTILES);
SLICE_SAMPLE = f"""
SELECT queue, kind, hashint8(id) & 1048575,
       {WAIT_AND_RUN}
  FROM queue_engine_jobrecord
 WHERE finished_at >= %(start)s AND finished_at < %(end)s
   AND started_at IS NOT NULL
   AND (hashint8(id) & 1048575) < %(most)s
"""


# ... and a slice's rows the buckets count.
SLICE_ROWS = f"""
SELECT count(*) FROM queue_engine_jobrecord
 WHERE finished_at >= %(start)s AND finished_at < %(end)s AND {NOT_REUSED}
"""


# Minute buckets computed by the slices, written in one statement.
INSERT_MINUTE_FIGURES = """
INSERT INTO queue_engine_metricbucket
       (size, bucket, queue, kind, succeeded, failed, cancelled, retried, timed,
        wait_sum, run_sum, wait_p50, wait_p95, run_p50, run_p95, rescued)
SELECT 60, * FROM unnest(
       %(bucket)s::timestamptz[], %(queue)s::varchar[], %(kind)s::varchar[],
       %(succeeded)s::int[], %(failed)s::int[], %(cancelled)s::int[], %(retried)s::int[],
       %(timed)s::int[], %(wait_sum)s::float8[], %(run_sum)s::float8[],
       %(wait_p50)s::float8[], %(wait_p95)s::float8[], %(run_p50)s::float8[],
       %(run_p95)s::float8[], %(rescued)s::int[])
"""


# The minute buckets' rows in [start, end).
COUNTED_ROWS = """
SELECT COALESCE(sum(succeeded + failed + cancelled), 0) FROM queue_engine_metricbucket
 WHERE size = 60 AND bucket >= %(start)s AND bucket < %(end)s
"""


# Whether no transaction of this database that started before %(moment)s is still open:
# then no history row that finished before it can be added any more (finished_at is the
# settling transaction's start). A session whose state this role may not see, and any
# prepared transaction, count as open.
NOTHING_OPEN_BEFORE = """
SELECT NOT EXISTS (
           SELECT 1 FROM pg_stat_activity
            WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'
              AND datname = current_database()
              AND (xact_start < %(moment)s OR (xact_start IS NULL AND state IS NULL)))
   AND NOT EXISTS (SELECT 1 FROM pg_prepared_xacts)
"""


# Whether the history holds rows in [start, end) that its minute buckets do not count:
# rows whose settle committed after the pass that counted their minute.
UNCOUNTED_ROWS = f"""
SELECT (SELECT count(*) FROM queue_engine_jobrecord
         WHERE finished_at >= %(start)s AND finished_at < %(end)s AND {NOT_REUSED})
    <> (SELECT COALESCE(sum(succeeded + failed + cancelled), 0) FROM queue_engine_metricbucket
         WHERE size = 60 AND bucket >= %(start)s AND bucket < %(end)s)
"""


# Hour buckets recomputed from their minute buckets; percentiles are the
# timed-weighted means of the minutes' percentiles (an approximation).
INSERT_HOUR_BUCKETS = f"""
INSERT INTO queue_engine_metricbucket
       (size, bucket, queue, kind, succeeded, failed, cancelled, retried, timed,
        wait_sum, run_sum, wait_p50, wait_p95, run_p50, run_p95, rescued)
SELECT 3600, date_bin('1 hour', bucket, {BUCKET_ORIGIN}), queue, kind,
       sum(succeeded), sum(failed), sum(cancelled), sum(retried), sum(timed),
       sum(wait_sum), sum(run_sum),
       sum(wait_p50 * timed) / NULLIF(sum(timed), 0),
       sum(wait_p95 * timed) / NULLIF(sum(timed), 0),
       sum(run_p50 * timed) / NULLIF(sum(timed), 0),
       sum(run_p95 * timed) / NULLIF(sum(timed), 0),
       sum(rescued)
  FROM queue_engine_metricbucket
 WHERE size = 60 AND bucket >= %(start)s AND bucket < %(end)s
 GROUP BY 2, 3, 4
"""


# Old buckets of one size, a batch at a time (minute buckets serve windows up to
# a day, hour buckets the longer ones).
PRUNE_BUCKETS = """
DELETE FROM queue_engine_metricbucket
 WHERE id IN (SELECT id FROM queue_engine_metricbucket
               WHERE size = %(size)s AND bucket < now() - make_interval(secs => %(keep)s)
               LIMIT %(limit)s)
"""


# The live job table's dead and live rows, from the statistics (worker/services/vacuum.py).
LIVE_TABLE_ROWS = """
SELECT n_dead_tup, n_live_tup FROM pg_stat_user_tables
 WHERE relid = 'queue_engine_job'::regclass
"""


# The dead and live rows of each of these tables (names), for the leader's vacuum.
TABLE_ROWS = """
SELECT relname, n_dead_tup, n_live_tup FROM pg_stat_user_tables
 WHERE relid = ANY(%s::regclass[])
"""


# The history's BRIN index on finished_at (qe_rec_finished_brin) summarizes the pages
# appended since the last call. A page range without a summary matches every range
# query: until VACUUM summarizes it (and autovacuum may never come, or come after a
# fifth of the table has been added), the rollup's, retention's and the console's
# reads by finish time read every unsummarized page of the history.
# The history is partitioned (queue_engine.schema.partitions): this summarizes each leaf's index.
SUMMARIZE_FINISHED = """
WITH RECURSIVE part (oid) AS (
    SELECT 'qe_rec_finished_brin'::regclass::oid
    UNION ALL
    SELECT i.inhrelid FROM pg_inherits i JOIN part ON i.inhparent = part.oid
)
SELECT sum(brin_summarize_new_values(c.oid))
  FROM part JOIN pg_class c ON c.oid = part.oid
 WHERE c.relkind = 'i'
"""


# Summarizing waits for no vacuum of the history: it tries again at the next pass.
SUMMARIZE_LOCK_TIMEOUT = "SET LOCAL lock_timeout = '100ms'"


# For the rollup's transaction: its hash tables and the sorts of its samples in memory
# rather than in temporary files that compete with the commits'
# WAL flushes, no JIT compilation of its statements, and no parallel workers: a pass
# takes at most one core from the workers, however much history it reads.
ROLLUP_SETTINGS = (
    "SET LOCAL work_mem = '64MB'",
    "SET LOCAL jit = off",
    "SET LOCAL max_parallel_workers_per_gather = 0",
)
