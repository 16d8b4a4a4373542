"""What a running job writes while it runs: lease heartbeats, progress, log lines."""

from queue_engine.sql.fragments import AT, FENCED, RUNNING

# Renew the leases this process holds. The rows in the result are still ours; rows
# missing from it were taken from us (cancelled, rescued or removed) and must stop.
# - A row another transaction holds locked is not waited for (SKIP LOCKED): it keeps
#   its lease until the next beat. Waiting, a beat stalled behind a handler's own
#   transaction (ctx.atomic(), which holds its row to the end) and the worker's other
#   jobs lost their leases and ran again; and a beat that had renewed one row and
#   waited for the next could deadlock with a settle of the same rows walking them in
#   another order (another plan).
# - Whether a row is ours is read from the statement's snapshot, locked or not: a row a
#   settle or a cancel is deleting is still listed, and missing from the next beat.
HEARTBEAT = f"""
WITH free AS (
    SELECT j.id FROM queue_engine_job j
     WHERE {FENCED}
       FOR NO KEY UPDATE SKIP LOCKED
), renewed AS (
    UPDATE queue_engine_job j
       SET lease_expires_at = now() + (j.lease_expires_at - j.heartbeat_at),
           heartbeat_at = now()
     WHERE j.id = ANY(ARRAY(SELECT id FROM free))
)
SELECT j.id, j.meta ? 'cancel_requested' FROM queue_engine_job j WHERE {FENCED}
"""


# Progress reports, the latest per job, fenced like a settle: in the settle itself,
# before its rows move.
PROGRESS = f"""
UPDATE queue_engine_job j
   SET progress = (%(fractions)s::float8[])[{AT}],
       progress_message = (%(messages)s::text[])[{AT}]
 WHERE {FENCED}
"""


# The same between settles (the worker's flusher), without waiting for a locked row
# (HEARTBEAT says why): it returns the rows it wrote, and the worker reports the others
# again with the next flush, or with their settle.
PROGRESS_UNLOCKED = f"""
WITH free AS (
    SELECT j.id FROM queue_engine_job j
     WHERE {FENCED}
       FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE queue_engine_job j
   SET progress = (%(fractions)s::float8[])[{AT}],
       progress_message = (%(messages)s::text[])[{AT}]
 WHERE j.id = ANY(ARRAY(SELECT id FROM free))
RETURNING j.id
"""


# Lock one running job for an in-handler transaction that completes it (ctx.atomic).
LOCK_OWN_JOB = f"""
SELECT meta ? 'cancel_requested' FROM queue_engine_job
 WHERE id = %s AND claim_token = %s AND state = {RUNNING}
   FOR UPDATE
"""


# A batch of log lines from the arrays of their columns, in one statement.
INSERT_LOGS = """
INSERT INTO queue_engine_joblog (job_id, attempt, seq, stream, level, at, text)
SELECT * FROM unnest(%(job_ids)s::bigint[], %(attempts)s::int[], %(seqs)s::int[],
                     %(streams)s::varchar[], %(levels)s::varchar[], %(ats)s::timestamptz[],
                     %(texts)s::text[])
"""
