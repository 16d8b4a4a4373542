"""The kill switch per job kind, and what the Kinds page reads."""

# Pause or resume a kind; a row comes back only when its state changed.
SET_KIND_PAUSED = """
INSERT INTO queue_engine_kindcontrol AS k (kind, paused, changed_at, changed_by)
VALUES (%(kind)s, %(paused)s, now(), %(actor)s)
ON CONFLICT (kind) DO UPDATE
   SET paused = EXCLUDED.paused, changed_at = now(), changed_by = EXCLUDED.changed_by
 WHERE k.paused <> EXCLUDED.paused
RETURNING kind
"""


# Whether any job of the kind ever ended (qe_rec_kind), for refusing a misspelt kind.
KIND_SEEN = """
SELECT EXISTS (SELECT 1 FROM queue_engine_jobrecord WHERE kind = %(kind)s)
    OR EXISTS (SELECT 1 FROM queue_engine_kindcontrol WHERE kind = %(kind)s)
    OR EXISTS (SELECT 1 FROM queue_engine_metricbucket WHERE kind = %(kind)s)
"""


# Whether a job of the kind waits or runs: no index has the kind, so this is asked only
# when KIND_SEEN says no (a kind whose first jobs are queued, before any has ended).
KIND_LIVE = "SELECT EXISTS (SELECT 1 FROM queue_engine_job WHERE kind = %(kind)s)"


# Every queue with a configuration row: a resumed kind may have jobs in any of them.
ALL_QUEUES = "SELECT COALESCE(array_agg(name), '{}') FROM queue_engine_queueconfig"


# The Kinds page, live jobs: the first %(scan)s + 1 rows of the live table counted by
# kind, queue and state (exact when that is the whole table; lower bounds otherwise).
KIND_LIVE_COUNTS = """
SELECT kind, queue, state, count(*)
  FROM (SELECT kind, queue, state FROM queue_engine_job LIMIT %(scan)s + 1) AS probe
 GROUP BY 1, 2, 3
"""


# The Kinds page, dead jobs by kind: the first %(scan)s + 1 of the dead letter (the
# failed leaves' primary keys, walked backwards).
KIND_DEAD_COUNTS = """
SELECT kind, queue, count(*)
  FROM (SELECT kind, queue FROM queue_engine_jobrecord WHERE state = 'failed'
         ORDER BY id DESC LIMIT %(scan)s + 1) AS probe
 GROUP BY 1, 2
"""


# The Kinds page, the last hour from the rollup's minute buckets: outcomes, retries and
# the run time percentiles (timed-weighted means of the minutes'), per kind and queue.
KIND_HOUR = """
SELECT kind, array_agg(DISTINCT queue ORDER BY queue),
       sum(succeeded), sum(failed), sum(cancelled), sum(retried),
       sum(run_p50 * timed) / NULLIF(sum(timed), 0),
       sum(run_p95 * timed) / NULLIF(sum(timed), 0)
  FROM queue_engine_metricbucket
 WHERE size = 60 AND bucket >= now() - interval '1 hour'
 GROUP BY kind
"""


# Kinds that ran in the last week (hour buckets), so that a kind shows on the page after
# its jobs ended and its workers stopped registering it.
KINDS_OF_THE_WEEK = """
SELECT DISTINCT kind FROM queue_engine_metricbucket
 WHERE size = 3600 AND bucket >= now() - interval '7 days'
"""
