"""What the leader runs: its election, promotion of due jobs, rescue of expired leases,
and the sweeps of stale workers and old claim-log rows.
"""

from queue_engine.sql.fragments import MOVED
from queue_engine.sql.notify import wake_per_queue

# Claim-log rows older than their queue's rate window: no rate limit reads them again.
PRUNE_CLAIM_LOG = """
DELETE FROM queue_engine_claimlog l
 WHERE l.at < now() - make_interval(secs => COALESCE(
           (SELECT c.rate_window FROM queue_engine_queueconfig c WHERE c.name = l.queue), 0))
"""


def promote(state: str, also: str = "") -> str:
    """Jobs in `state` whose run_at has come become available (setting `also` too), a
    batch of %(limit)s; one statement (one round trip, atomic on its own): promote and
    wake each queue once."""
    return f"""
WITH due AS (
    SELECT id FROM queue_engine_job
     WHERE state = '{state}' AND run_at <= now()
     ORDER BY run_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), promoted AS (
    UPDATE queue_engine_job j SET state = 'available'{also}
      FROM due WHERE j.id = due.id
    RETURNING j.id, j.queue, j.labels, j.priority, j.run_at
), woken AS ({wake_per_queue("promoted")}
)
-- In the select list, where it must run once for the rows to be returned: referenced
-- through a join on true, Postgres dropped the join and woke no one.
SELECT p.queue, (SELECT count(*) FROM woken) AS woken FROM promoted p
"""


# Scheduled jobs whose time has come become available (at most one poll late).
PROMOTE_SCHEDULED = promote("scheduled")


# Expired leases: back to available with the lost attempt recorded, unless the
# job ran out of attempts or was rescued too often (a poison job), then dead.
RESCUE_EXPIRED = f"""
WITH expired AS (
    SELECT id FROM queue_engine_job
     WHERE state = 'running' AND lease_expires_at < now()
     ORDER BY id
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), err AS (
    SELECT j.id,
           jsonb_build_object('attempt', j.attempt, 'class', 'queue_engine.LeaseExpired',
               'message', 'the worker stopped heartbeating (killed or hung); lease expired',
               'traceback', '', 'worker', j.lease_owner, 'at', now()) AS error,
           (j.rescues + 1 >= %(max_rescues)s OR j.attempt >= j.max_attempts) AS dead,
           j.meta ? 'cancel_requested' AS cancel
      FROM queue_engine_job j JOIN expired USING (id)
), stopped AS (
    -- Asked to stop, and its worker is gone: it ends cancelled, as its worker would
    -- have settled it.
    DELETE FROM queue_engine_job j USING err
     WHERE j.id = err.id AND err.cancel
    RETURNING j.*
), cancelled AS (
    INSERT INTO queue_engine_jobrecord ({MOVED}, state, worker, finished_at)
    SELECT id, queue, kind, name, priority, payload, attempt, max_attempts, backoff,
           errors || jsonb_build_array(jsonb_build_object(
               'attempt', attempt, 'class', 'queue_engine.Cancelled',
               'message', 'cancelled by '
                   || COALESCE(meta->'cancel_requested'->>'by', 'an operator')
                   || '; its worker stopped heartbeating before it stopped the handler',
               'traceback', '', 'worker', lease_owner, 'at', now())),
           dedup_key, group_key, labels, flow_id, node_key, meta, progress, progress_message,
           rescues, run_at, created_at, started_at, 'cancelled', lease_owner, now()
      FROM stopped
    RETURNING id, queue
), dead AS (
    DELETE FROM queue_engine_job j USING err
     WHERE j.id = err.id AND err.dead AND NOT err.cancel
    RETURNING j.*, err.error AS d_error
), buried AS (
    INSERT INTO queue_engine_jobrecord ({MOVED}, state, worker, finished_at)
    SELECT id, queue, kind, name, priority, payload, attempt, max_attempts, backoff,
           errors || jsonb_build_array(d_error), dedup_key, group_key, labels, flow_id,
           node_key, meta, progress, progress_message, rescues + 1, run_at, created_at,
           started_at, 'failed', lease_owner, now()
      FROM dead
    RETURNING id, queue
), revived AS (
    UPDATE queue_engine_job j
       SET state = 'available', rescues = j.rescues + 1,
           errors = j.errors || jsonb_build_array(err.error),
           lease_owner = NULL, claim_token = NULL, lease_expires_at = NULL
      FROM err
     WHERE j.id = err.id AND NOT err.dead AND NOT err.cancel
    RETURNING j.id, j.queue
)
SELECT 'revived', id, queue FROM revived
UNION ALL
SELECT 'dead', id, queue FROM buried
UNION ALL
SELECT 'cancelled', id, queue FROM cancelled
"""


# Registrations of workers that have not heartbeated for that many seconds.
SWEEP_STALE_WORKERS = """
DELETE FROM queue_engine_workerprocess
 WHERE heartbeat_at < now() - make_interval(secs => %s)
"""


# The advisory lock whose holder is the leader: one holder in the whole fleet, and
# Postgres frees it when the holder's connection ends.
LEADER_LOCK_KEY = 7_146_010_351_917_311  # pg_try_advisory_lock key of the leader


# Take the leader's lock if it is free; never waits.
TRY_LEADER_LOCK = "SELECT pg_try_advisory_lock(%s)"


# Tell listeners a leader service ran a step (worker/services/runner.py); only with
# QUEUE_ENGINE["SERVICE_EVENTS"] on. Delivered at once: the leader's connection autocommits.
SERVICE_EVENTS_CHANNEL = "queue_engine_service"
SERVICE_RAN = "SELECT pg_notify('queue_engine_service', %s)"


# A queue's right to empty a worker for its suspects (worker/quarantine.py): a session
# advisory lock, one holder in the fleet per queue, freed when the holder's connection
# ends. Takes the free ones among the queues given and returns them; never waits.
TRY_SUSPECT_RIGHTS = """
SELECT q FROM unnest(%s::text[]) AS t(q)
 WHERE pg_try_advisory_lock(hashtextextended('queue_engine.suspects:' || q, 0))
"""

# Let the rights of these queues go (only a holder's own: an unheld one is a warning).
LET_GO_SUSPECT_RIGHTS = """
SELECT pg_advisory_unlock(hashtextextended('queue_engine.suspects:' || q, 0))
  FROM unnest(%s::text[]) AS t(q)
"""
