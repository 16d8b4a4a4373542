"""Settling finished jobs: each outcome moves its row, fenced by the claim's token."""

from queue_engine.sql.fragments import (
    AT,
    CANCEL_NOT_REQUESTED,
    DELAY,
    FENCED,
    MOVED,
    SUCCEEDED_DONE,
    SUCCEEDED_MOVE,
    at,
)
from queue_engine.sql.notify import wake_per_queue

# Succeeded jobs (not flow nodes): out of the live table and into the history, fenced by
# their claim token, in one statement.
SETTLE_SUCCEEDED = f"WITH {SUCCEEDED_DONE}{SUCCEEDED_MOVE}\n"


# Failed for good (fatal, out of attempts, or abandoned): to the dead letter,
# with this attempt's error appended.
SETTLE_FAILED = f"""
WITH done AS (
    DELETE FROM queue_engine_job j
     WHERE {FENCED}
    RETURNING j.*, (%(errors)s::jsonb[])[{AT}] AS d_error
)
INSERT INTO queue_engine_jobrecord ({MOVED}, state, worker, finished_at)
SELECT id, queue, kind, name, priority, payload, attempt, max_attempts, backoff,
       errors || jsonb_build_array(d_error), dedup_key, group_key, labels, flow_id, node_key,
       meta, progress, progress_message, rescues, run_at, created_at, started_at,
       'failed', lease_owner, now()
  FROM done
RETURNING id
"""


# A handler stopped after an operator's cancel: the job ends cancelled.
SETTLE_CANCELLED = f"""
WITH done AS (
    DELETE FROM queue_engine_job j
     WHERE {FENCED}
    RETURNING j.*
)
INSERT INTO queue_engine_jobrecord ({MOVED}, state, worker, finished_at)
SELECT id, queue, kind, name, priority, payload, attempt, max_attempts, backoff,
       errors || jsonb_build_array(jsonb_build_object(
           'attempt', attempt, 'class', 'queue_engine.Cancelled',
           'message', 'cancelled by ' || COALESCE(meta->'cancel_requested'->>'by', 'an operator'),
           'traceback', '', 'worker', lease_owner, 'at', now())),
       dedup_key, group_key, labels, flow_id, node_key, meta, progress, progress_message,
       rescues, run_at, created_at, started_at, 'cancelled', lease_owner, now()
  FROM done
RETURNING id
"""


# Retry later: back to scheduled (or available at once) with the error kept; a wait
# the attempt was parked in (meta.parked) starts afresh in the next one.
SETTLE_RETRY = f"""
UPDATE queue_engine_job j
   SET state = CASE WHEN {DELAY} > 0 THEN 'scheduled' ELSE 'available' END,
       run_at = now() + make_interval(secs => {DELAY}),
       errors = j.errors || jsonb_build_array((%(errors)s::jsonb[])[{AT}]),
       meta = j.meta - 'parked',
       lease_owner = NULL, claim_token = NULL, lease_expires_at = NULL
 WHERE {FENCED} AND {CANCEL_NOT_REQUESTED}
RETURNING j.id, j.queue, j.state
"""


# Snooze: run again later without using up the attempt, optionally with a new payload.
SETTLE_SNOOZED = f"""
UPDATE queue_engine_job j
   SET state = CASE WHEN {DELAY} > 0 THEN 'scheduled' ELSE 'available' END,
       run_at = now() + make_interval(secs => {DELAY}),
       attempt = j.attempt - 1,
       payload = COALESCE((%(payloads)s::jsonb[])[{AT}], j.payload),
       meta = j.meta || jsonb_build_object('snoozed', COALESCE((j.meta->>'snoozed')::int, 0) + 1),
       lease_owner = NULL, claim_token = NULL, lease_expires_at = NULL
 WHERE {FENCED} AND {CANCEL_NOT_REQUESTED}
RETURNING j.id, j.queue, j.state
"""


# Give jobs back untouched (shutdown): available again, the attempt not counted.
_RELEASE = """
UPDATE queue_engine_job j
   SET state = 'available', attempt = GREATEST(j.attempt - 1, 0),{run_at}
       lease_owner = NULL, claim_token = NULL, lease_expires_at = NULL
 WHERE {fenced} AND {not_cancelled}
RETURNING j.id, j.queue
"""


# Jobs given back unfinished (a stop, a lost lease): available again at once, the
# attempt not counted, unless an operator asked to cancel them.
RELEASE = _RELEASE.format(run_at="", fenced=FENCED, not_cancelled=CANCEL_NOT_REQUESTED)


# Give back jobs whose plain-function handler still runs in a process about to exit:
# claimable only `after` seconds from now, when that process (and the thread with it)
# is surely gone, so that no other worker runs the same attempt meanwhile.
RELEASE_RUNNING = _RELEASE.format(
    run_at="\n       run_at = GREATEST(j.run_at, now() + make_interval(secs => %(after)s)),",
    fenced=FENCED,
    not_cancelled=CANCEL_NOT_REQUESTED,
)


# Sent at the end of a worker's message, after its claim, in the claim's transaction:
# wake the other workers for the queues its settle made jobs runnable in now (retried
# or snoozed with no delay, released: the queues given; flow children counted down to
# zero: the queues sql.NOTE_RELEASED noted in the session) if its own claim left
# runnable jobs there. Waking them at the settle's commit would send every worker's
# lanes after a chain's next node, which the settling lane then claims itself: a herd
# of empty claims at every step. A walk of the claim index per queue, in its order, up
# to 500 jobs (how many are left says how many workers the hint wakes, and the first of
# them where the workers' claims must start: worker/roster.py), rather than finding
# the released children again by their parents' edges.
# The note is cleared after it is read (CLEAR_RELEASED).
WAKE_LEFT = wake_per_queue("""(
    SELECT q.queue, j.* FROM (
        SELECT DISTINCT queue FROM unnest(
            %(queues)s::varchar[]
            || COALESCE(NULLIF(current_setting('qe.released', true), ''), '{}')::varchar[])
            AS u(queue)) q
     CROSS JOIN LATERAL (
           SELECT j.id, j.labels, j.priority, j.run_at FROM queue_engine_job j
            WHERE j.state = 'available' AND j.queue = q.queue AND j.run_at <= now()
            ORDER BY j.priority DESC, j.run_at, j.id
            LIMIT 500) j)""")


# Forget the queues NOTE_RELEASED noted, once WAKE_LEFT has read them.
CLEAR_RELEASED = "SELECT set_config('qe.released', '', false)"


# The return value of a job that completed inside ctx.atomic(), recorded afterwards.
# Read from the arrays by position, as the settles are (see AT).
RECORD_RESULT = f"""
UPDATE queue_engine_jobrecord r
   SET result = (%(results)s::jsonb[])[{at("r")}]
 WHERE r.id = ANY(%(ids)s::bigint[]) AND r.result IS NULL
"""
