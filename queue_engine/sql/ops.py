"""Operator actions on jobs: cancel, run now, redrive, remove."""

from queue_engine.sql.fragments import MOVED, back_to_live

# Cancel live jobs (any state): they move to history as cancelled. Running ones
# are told through NOTIFY and stop cooperatively; their settle is then fenced out.
OPS_CANCEL = f"""
WITH gone AS (
    DELETE FROM queue_engine_job j
     WHERE j.id = ANY(%(ids)s::bigint[]) AND j.state <> 'running'
    RETURNING j.*
)
INSERT INTO queue_engine_jobrecord ({MOVED}, state, worker, finished_at)
SELECT id, queue, kind, name, priority, payload, attempt, max_attempts, backoff,
       errors || jsonb_build_array(jsonb_build_object(
           'attempt', attempt, 'class', 'queue_engine.Cancelled',
           'message', 'cancelled by ' || %(actor)s, 'traceback', '',
           'worker', lease_owner, 'at', now())),
       dedup_key, group_key, labels, flow_id, node_key, meta, progress, progress_message,
       rescues, run_at, created_at, started_at, 'cancelled', COALESCE(lease_owner, ''), now()
  FROM gone
RETURNING id
"""


# A running job is asked to stop: it stays running, its slot still counted under
# the caps, until its worker has stopped the handler and settles it as cancelled
# (SETTLE_CANCELLED), or its lease expires (RESCUE_EXPIRED). A retry, snooze or
# release of it is refused (CANCEL_NOT_REQUESTED); a success or a failure stands.
OPS_REQUEST_CANCEL = """
UPDATE queue_engine_job j
   SET meta = j.meta || jsonb_build_object(
           'cancel_requested', jsonb_build_object('by', %(actor)s::text, 'at', now()))
 WHERE j.id = ANY(%(ids)s::bigint[]) AND j.state = 'running'
   AND NOT j.meta ? 'cancel_requested'
RETURNING j.id
"""


# Run waiting jobs now (scheduled for a retry or later): available at once.
OPS_RUN_NOW = """
UPDATE queue_engine_job SET state = 'available', run_at = now()
 WHERE id = ANY(%(ids)s::bigint[]) AND state IN ('available', 'scheduled')
RETURNING id, queue
"""


# Dead or cancelled jobs back to their queue with fresh attempts, their errors kept: each
# history row becomes a live row again in one statement, and ids that are not in those
# states are left alone.
OPS_REDRIVE = f"""
WITH locked AS (
    SELECT r.id FROM queue_engine_jobrecord r
     WHERE r.id = ANY(%(ids)s::bigint[]) AND r.state = ANY(%(states)s::varchar[])
     ORDER BY r.id
       FOR UPDATE
), picked AS (
    SELECT r.*, row_number() OVER (PARTITION BY r.kind, r.dedup_key ORDER BY r.id) AS nth
      FROM queue_engine_jobrecord r JOIN locked USING (id)
), gone AS (
    DELETE FROM queue_engine_jobrecord r USING picked
     WHERE r.id = picked.id
    RETURNING picked.*
)
INSERT INTO queue_engine_job ({MOVED}, state, pending_deps)
SELECT id, queue, kind, name, priority, payload, 0, max_attempts, backoff, errors,
       {back_to_live("gone", "redriven")},
       NULL, '', 0, now(), created_at, NULL, 'available', 0
  FROM gone
RETURNING id, queue
"""


# The next batch of a queue's dead letter, oldest first.
OPS_DEAD_BATCH = """
SELECT id FROM queue_engine_jobrecord
 WHERE queue = %(queue)s AND state = 'failed' AND id > %(after)s
 ORDER BY id LIMIT %(limit)s
"""


# Delete waiting live jobs for good; a running one is never deleted under its worker.
OPS_REMOVE_LIVE = """
DELETE FROM queue_engine_job WHERE id = ANY(%(ids)s::bigint[]) AND state <> 'running'
RETURNING id, flow_id
"""


# Delete ended jobs for good.
OPS_REMOVE_RECORDS = """
DELETE FROM queue_engine_jobrecord WHERE id = ANY(%(ids)s::bigint[]) RETURNING id, flow_id
"""


# A flow some of whose nodes were removed ends cancelled, never succeeded.
OPS_COUNT_REMOVED_NODES = """
UPDATE queue_engine_flow f SET removed_nodes = f.removed_nodes + r.n
  FROM (SELECT flow_id, count(*)::int AS n FROM unnest(%s::bigint[]) AS u(flow_id)
         GROUP BY flow_id) r
 WHERE f.id = r.flow_id
"""


# The flows these jobs (live or ended) are nodes of: an action refreshes their state.
FLOWS_OF_JOBS = """
SELECT DISTINCT flow_id FROM queue_engine_jobrecord WHERE id = ANY(%s) AND flow_id IS NOT NULL
UNION
SELECT DISTINCT flow_id FROM queue_engine_job WHERE id = ANY(%s) AND flow_id IS NOT NULL
"""

# The running jobs among these ids: a remove leaves them (and what depends on them).
RUNNING_AMONG = "SELECT id FROM queue_engine_job WHERE id = ANY(%s) AND state = 'running'"

# Succeeded flow nodes among these ids, locked: their dependants already counted them
# down, so a redrive must leave them (a second settle would count them down again).
COUNTED_FLOW_NODES = """
SELECT id FROM queue_engine_jobrecord
 WHERE id = ANY(%s) AND state = 'succeeded' AND flow_id IS NOT NULL
   FOR UPDATE
"""
