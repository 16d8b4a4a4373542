"""SQL of the leader's maintenance services and of schedule declarations.

The schedule firer, the retention collector and the metrics rollup, each
statement named, with what it guarantees. Parameters are always bound. Time
buckets are aligned on UTC whatever the session's time zone (date_bin).
"""

DATABASE_NOW = "SELECT now()"

# --- schedules ------------------------------------------------------------------

# Serialises declarations of one schedule name (workers start together and each
# declares the settings' schedules), for the rest of the transaction.
LOCK_SCHEDULE_NAME = (
    "SELECT pg_advisory_xact_lock(hashtextextended('queue_engine.schedule:' || %s, 0))"
)

# Enabled schedules whose next fire time has come, locked: a second firer (a
# leader that does not know yet it was replaced) skips them instead of firing twice.
# A cheap probe, outside any transaction: is any schedule due at all?
ANY_DUE_SCHEDULE = """
SELECT EXISTS (SELECT 1 FROM queue_engine_schedule WHERE enabled AND next_fire_at <= now())
"""

SELECT_DUE_SCHEDULES = """
SELECT id, name, kind, payload, queue, priority, every, cron, timezone, missed_fire_policy,
       next_fire_at, now()
  FROM queue_engine_schedule
 WHERE enabled AND next_fire_at <= now()
 ORDER BY next_fire_at
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED
"""

# Move a schedule past the fire time it was due at, in the transaction that
# enqueued its job; fenced on the fire time read, so one fire time fires once.
ADVANCE_SCHEDULE = """
UPDATE queue_engine_schedule
   SET next_fire_at = %(next_fire_at)s,
       last_fire_at = COALESCE(%(fired_at)s, last_fire_at),
       last_job_id = COALESCE(%(job_id)s, last_job_id),
       last_error = %(error)s,
       updated_at = now()
 WHERE id = %(id)s AND next_fire_at = %(expected)s
"""

# --- queues -----------------------------------------------------------------------

_QUEUE_SETTINGS = """paused, max_concurrency, rate_limit, rate_window, lock_duration,
       group_concurrency, retain_succeeded, retain_failed, retain_cancelled"""
_QUEUE_VALUES = """%(paused)s, %(max_concurrency)s, %(rate_limit)s, %(rate_window)s,
       %(lock_duration)s, %(group_concurrency)s, %(retain_succeeded)s, %(retain_failed)s,
       %(retain_cancelled)s"""

# A queue's settings row, created with the values settings give it if no job has used
# the queue yet; an existing row is left as it is.
ENSURE_QUEUE_CONFIG = f"""
INSERT INTO queue_engine_queueconfig (name, {_QUEUE_SETTINGS})
VALUES (%(name)s, {_QUEUE_VALUES})
ON CONFLICT (name) DO NOTHING
"""

# The values a queue first seen by an enqueue starts with (the enqueue trigger copies
# them: it cannot read Django settings); one row, replaced at worker start and migrate.
SAVE_QUEUE_DEFAULTS = f"""
INSERT INTO queue_engine_queuedefaults (id, {_QUEUE_SETTINGS})
VALUES (1, {_QUEUE_VALUES})
ON CONFLICT (id) DO UPDATE
   SET paused = EXCLUDED.paused, max_concurrency = EXCLUDED.max_concurrency,
       rate_limit = EXCLUDED.rate_limit, rate_window = EXCLUDED.rate_window,
       lock_duration = EXCLUDED.lock_duration, group_concurrency = EXCLUDED.group_concurrency,
       retain_succeeded = EXCLUDED.retain_succeeded, retain_failed = EXCLUDED.retain_failed,
       retain_cancelled = EXCLUDED.retain_cancelled, updated_at = now()
"""

# --- retention --------------------------------------------------------------------

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

RETENTION_CUTOFF = f"SELECT {_RETENTION_CUTOFF}"

# One batch of a queue's ended jobs of one state that are past the cutoff (and,
# when given, ended after %(since)s: older ones were swept already), with their
# log lines. Locked rows (being redriven) are skipped. No ORDER BY: finished_at
# has a BRIN index, which cannot sort, and any expired rows will do.
DELETE_EXPIRED_BATCH = f"""
WITH doomed AS (
    SELECT id FROM queue_engine_jobrecord
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
)
DELETE FROM queue_engine_jobrecord r USING doomed WHERE r.id = doomed.id
RETURNING r.id
"""

# --- metrics rollup ---------------------------------------------------------------

ROLLUP_ORIGIN = "2000-01-01 00:00:00+00"

ENSURE_ROLLUP_STATE = """
INSERT INTO queue_engine_rollupstate (name, rolled_up_to) VALUES ('metrics', NULL)
ON CONFLICT (name) DO NOTHING
"""

# The watermark, locked for the rollup's transaction, and the database clock.
LOCK_ROLLUP_STATE = """
SELECT rolled_up_to, now() FROM queue_engine_rollupstate WHERE name = 'metrics' FOR UPDATE
"""

OLDEST_FINISHED = "SELECT min(finished_at) FROM queue_engine_jobrecord"

SET_ROLLED_UP_TO = """
UPDATE queue_engine_rollupstate SET rolled_up_to = %s WHERE name = 'metrics'
"""

DELETE_BUCKETS = """
DELETE FROM queue_engine_metricbucket
 WHERE size = %(size)s AND bucket >= %(start)s AND bucket < %(end)s
"""

# Minute buckets recomputed from the history rows that finished in [start, end).
# Wait: from run_at to the start of the last attempt; run: start to finish; both
# NULL for jobs that never started (GREATEST alone would turn NULL into 0).
INSERT_MINUTE_BUCKETS = f"""
INSERT INTO queue_engine_metricbucket
       (size, bucket, queue, kind, succeeded, failed, cancelled, retried, timed,
        wait_sum, run_sum, wait_p50, wait_p95, run_p50, run_p95)
SELECT 60, date_bin('1 minute', finished_at, TIMESTAMPTZ '{ROLLUP_ORIGIN}'), queue, kind,
       count(*) FILTER (WHERE state = 'succeeded'),
       count(*) FILTER (WHERE state = 'failed'),
       count(*) FILTER (WHERE state = 'cancelled'),
       COALESCE(sum(GREATEST(attempt - 1, 0)), 0),
       count(wait),
       COALESCE(sum(wait), 0), COALESCE(sum(run), 0),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY wait),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY wait),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY run),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY run)
  FROM (SELECT finished_at, queue, kind, state, attempt,
               CASE WHEN started_at IS NOT NULL
                    THEN GREATEST(EXTRACT(epoch FROM started_at - run_at), 0)
               END::float8 AS wait,
               CASE WHEN started_at IS NOT NULL
                    THEN GREATEST(EXTRACT(epoch FROM finished_at - started_at), 0)
               END::float8 AS run
          FROM queue_engine_jobrecord
         WHERE finished_at >= %(start)s AND finished_at < %(end)s) r
 GROUP BY 2, 3, 4
"""

# Hour buckets recomputed from their minute buckets; percentiles are the
# timed-weighted means of the minutes' percentiles (an approximation).
INSERT_HOUR_BUCKETS = f"""
INSERT INTO queue_engine_metricbucket
       (size, bucket, queue, kind, succeeded, failed, cancelled, retried, timed,
        wait_sum, run_sum, wait_p50, wait_p95, run_p50, run_p95)
SELECT 3600, date_bin('1 hour', bucket, TIMESTAMPTZ '{ROLLUP_ORIGIN}'), queue, kind,
       sum(succeeded), sum(failed), sum(cancelled), sum(retried), sum(timed),
       sum(wait_sum), sum(run_sum),
       sum(wait_p50 * timed) / NULLIF(sum(timed), 0),
       sum(wait_p95 * timed) / NULLIF(sum(timed), 0),
       sum(run_p50 * timed) / NULLIF(sum(timed), 0),
       sum(run_p95 * timed) / NULLIF(sum(timed), 0)
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
