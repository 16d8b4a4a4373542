"""What GET /metrics reads besides the console's queue counts: the rollup's last complete
minutes (which end at its watermark, reads.ROLLED_UP_TO), whether some session holds the
leader's lock, and what holds vacuum back (the overview shows it too). Each is an index
range or a catalog read, so a scrape costs the same whatever the history holds."""

from __future__ import annotations

# Finished jobs by outcome, failed attempts that ran again, and jobs that ended after a
# rescue, per queue and kind, over minute buckets in [start, end).
RECENT_OUTCOMES = """
SELECT queue, kind, sum(succeeded), sum(failed), sum(cancelled), sum(retried), sum(rescued)
  FROM queue_engine_metricbucket
 WHERE size = 60 AND bucket >= %(start)s AND bucket < %(end)s
 GROUP BY queue, kind
"""


# Wait (run_at to start) and run (start to finish) percentiles per queue over the same
# minutes: the timed-weighted means of the minutes' percentiles, as hour buckets are.
RECENT_TIMES = """
SELECT queue,
       sum(wait_p50 * timed) / NULLIF(sum(timed), 0),
       sum(wait_p95 * timed) / NULLIF(sum(timed), 0),
       sum(run_p50 * timed) / NULLIF(sum(timed), 0),
       sum(run_p95 * timed) / NULLIF(sum(timed), 0)
  FROM queue_engine_metricbucket
 WHERE size = 60 AND bucket >= %(start)s AND bucket < %(end)s
 GROUP BY queue
"""


# Whether a session holds the leader's advisory lock in this database (advisory locks
# are per database; another database's engine on the same server has a leader of its
# own): a bigint key shows in pg_locks as its high half in classid and its low half in
# objid, with objsubid 1.
LEADER_LOCK_HELD = """
SELECT EXISTS (
    SELECT 1 FROM pg_locks
     WHERE locktype = 'advisory' AND granted AND objsubid = 1
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND classid::bigint = %(high)s AND objid::bigint = %(low)s)
"""


# What keeps vacuum from removing this database's dead rows (the live job table's
# among them) for longer than %(after)s seconds: sessions whose snapshot or transaction
# is that old (a report, a stuck migration, a session idle in transaction), prepared
# transactions, and replication slots that hold an xmin. Oldest first. Another role's
# sessions show only with pg_read_all_stats (pg_monitor): without it their xmin is NULL.
HORIZON_HOLDERS = """
SELECT * FROM (
    SELECT pid, application_name, state,
           now() - COALESCE(xact_start, query_start, backend_start) AS age, 'session'
      FROM pg_stat_activity
     WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
       AND datname = current_database()
       AND COALESCE(xact_start, query_start, backend_start)
           < now() - make_interval(secs => %(after)s)
    UNION ALL
    SELECT NULL, gid, 'prepared', now() - prepared, 'prepared transaction'
      FROM pg_prepared_xacts
     WHERE database = current_database() AND prepared < now() - make_interval(secs => %(after)s)
    UNION ALL
    SELECT NULL, slot_name, CASE WHEN active THEN 'active' ELSE 'inactive' END, NULL,
           'replication slot'
      FROM pg_replication_slots
     WHERE xmin IS NOT NULL AND (database IS NULL OR database = current_database())
) holders
ORDER BY age DESC NULLS LAST
LIMIT 5
"""


# Seconds an address must still wait, while its wrong tokens reached the limit within
# the window; no row when it may scrape.
SCRAPE_REFUSED_FOR = """
SELECT ceil(extract(epoch FROM since + make_interval(secs => %(window)s) - now()))::int
  FROM queue_engine_scrapefailure
 WHERE address = %(address)s AND failures >= %(limit)s
   AND since > now() - make_interval(secs => %(window)s)
"""


# Count one wrong token from an address, in one atomic upsert (several web processes may
# count at once): a window that ended starts again at 1. Rows of ended windows go too,
# so the table holds only the addresses that failed lately.
SCRAPE_FAILED = """
WITH forgotten AS (
    DELETE FROM queue_engine_scrapefailure
     WHERE since <= now() - make_interval(secs => %(window)s) AND address <> %(address)s
)
INSERT INTO queue_engine_scrapefailure AS f (address, failures, since)
VALUES (%(address)s, 1, now())
ON CONFLICT (address) DO UPDATE
   SET failures = CASE WHEN f.since > now() - make_interval(secs => %(window)s)
                       THEN f.failures + 1 ELSE 1 END,
       since = CASE WHEN f.since > now() - make_interval(secs => %(window)s)
                    THEN f.since ELSE now() END
"""
