"""Schedules: declarations serialised by name, and the due ones fired by the leader."""

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


# Enabled schedules whose next fire time has come, the most overdue first, locked so
# that a second leader (one that does not know yet it was replaced) skips them.
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


# The console's last fires of each schedule, newest first, live or ended: each table is
# walked by kind (its index's leading column, newest first in the history) and the
# schedule's name that every fire writes into the job's meta.
SCHEDULE_FIRES = """
SELECT s.name, f.id, f.state, f.fire_time, f.flow_id
  FROM unnest(%(names)s::text[], %(kinds)s::text[]) AS s(name, kind)
 CROSS JOIN LATERAL (
       SELECT * FROM (
              (SELECT j.id, j.state, j.meta->>'fire_time' AS fire_time, j.flow_id
                 FROM queue_engine_job j
                WHERE j.kind = s.kind AND j.meta->>'schedule' = s.name
                ORDER BY j.id DESC LIMIT %(per)s)
              UNION ALL
              (SELECT r.id, r.state, r.meta->>'fire_time', r.flow_id
                 FROM queue_engine_jobrecord r
                WHERE r.kind = s.kind AND r.meta->>'schedule' = s.name
                ORDER BY r.id DESC LIMIT %(per)s)
       ) AS both_tables
        ORDER BY id DESC LIMIT %(per)s
       ) AS f
 ORDER BY s.name, f.id DESC
"""
