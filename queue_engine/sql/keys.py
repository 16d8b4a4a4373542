"""A queue's group keys for the console: what each waits and runs, and its recent starts."""

# A queue's keys with jobs waiting or running, busiest first (at most %(limit)s), with
# how many of their jobs started in the last %(window)s seconds (running or ended since)
# and the queue's starts in that window, all keys, so that each key's share reads
# against the whole. Waiting is available or scheduled; parked and blocked jobs wait for
# something else than a slot. One pass over the queue's live jobs with a key, and over
# the history of the window (its finished_at bounds the partitions read).
QUEUE_KEYS = """
WITH live AS (
    SELECT j.group_key,
           count(*) FILTER (WHERE j.state IN ('available', 'scheduled')) AS waiting,
           count(*) FILTER (WHERE j.state = 'running') AS running,
           count(*) FILTER (WHERE j.state = 'running'
                              AND j.started_at > now() - make_interval(secs => %(window)s))
               AS started
      FROM queue_engine_job j
     WHERE j.queue = %(queue)s AND j.group_key IS NOT NULL
       AND j.state IN ('available', 'scheduled', 'running')
     GROUP BY j.group_key
), ended AS (
    SELECT r.group_key, count(*) AS started
      FROM queue_engine_jobrecord r
     WHERE r.queue = %(queue)s AND r.group_key IS NOT NULL
       AND r.finished_at > now() - make_interval(secs => %(window)s)
       AND r.started_at > now() - make_interval(secs => %(window)s)
     GROUP BY r.group_key
), keys AS (
    SELECT COALESCE(l.group_key, e.group_key) AS group_key,
           COALESCE(l.waiting, 0) AS waiting, COALESCE(l.running, 0) AS running,
           COALESCE(l.started, 0) + COALESCE(e.started, 0) AS started
      FROM live l FULL JOIN ended e ON e.group_key = l.group_key
)
SELECT k.group_key, k.waiting, k.running, k.started,
       (SELECT COALESCE(sum(started), 0)::bigint FROM keys) AS all_started,
       (SELECT count(*) FROM keys) AS all_keys
  FROM keys k
 ORDER BY k.waiting + k.running DESC, k.started DESC, k.group_key
 LIMIT %(limit)s
"""


# The starts these keys of a queue logged in its rate window (sql.CLAIM's log, per key
# when the queue's rate limit applies per key): what each has used of its budget.
KEYS_RATE_USED = """
SELECT l.group_key, sum(l.count)::bigint FROM queue_engine_claimlog l
 WHERE l.queue = %(queue)s AND l.group_key = ANY(%(keys)s::varchar[])
   AND l.at > now() - make_interval(secs => %(window)s)
 GROUP BY l.group_key
"""
