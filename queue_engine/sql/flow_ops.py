"""Operator actions on flows: requeue in place, rerun, rerun from a node (ops.flows)."""

from queue_engine.sql.fragments import MOVED, back_to_live

# Requeue a failed or cancelled flow in place: dead and cancelled nodes go back to
# the live table; every live node then waits for exactly its parents that have
# not succeeded. A node whose dedup key a live job holds now comes back without it
# (as a redrive does: sql.OPS_REDRIVE), and so does the second of two with one key.
REQUEUE_FLOW_NODES = f"""
WITH gone AS (
    DELETE FROM queue_engine_jobrecord r
     WHERE r.flow_id = %(flow)s AND r.state IN ('failed', 'cancelled')
    RETURNING r.*
), numbered AS (
    SELECT gone.*, row_number() OVER (PARTITION BY kind, dedup_key ORDER BY id) AS nth
      FROM gone
)
INSERT INTO queue_engine_job ({MOVED}, state, pending_deps)
SELECT id, queue, kind, name, priority, payload, 0, max_attempts, backoff, errors,
       {back_to_live("numbered", "requeued")},
       NULL, '', 0, now(), created_at, NULL, 'blocked', 0
  FROM numbered
RETURNING id
"""


# Parents whose rows are gone (retention removed their history) of the flow's nodes
# that are live, or (with %(ended)s) of any node still there: what a requeue (or a
# rerun) of the flow would wait for, or clone, in vain.
LOST_PARENTS = """
SELECT DISTINCT e.parent_id FROM queue_engine_flowedge e
 WHERE e.flow_id = %(flow)s
   AND (EXISTS (SELECT 1 FROM queue_engine_job j WHERE j.id = e.child_id)
        OR EXISTS (SELECT 1 FROM queue_engine_jobrecord r
                    WHERE r.id = e.child_id AND r.state = ANY(%(ended)s::varchar[])))
   AND NOT EXISTS (SELECT 1 FROM queue_engine_job j WHERE j.id = e.parent_id)
   AND NOT EXISTS (SELECT 1 FROM queue_engine_jobrecord r WHERE r.id = e.parent_id)
 ORDER BY 1
"""


# Redriven or retried flow nodes (back in the live table as available) wait again for
# their parents that have not succeeded: a node cancelled with its parent runs only
# after that parent, whichever of the two is redriven first.
WAIT_FOR_PARENTS = """
WITH counts AS (
    SELECT j.id, count(*) AS pending
      FROM queue_engine_job j
      JOIN queue_engine_flowedge e ON e.child_id = j.id
     WHERE j.id = ANY(%s::bigint[]) AND j.flow_id IS NOT NULL AND j.state = 'available'
       AND NOT EXISTS (SELECT 1 FROM queue_engine_jobrecord r
                        WHERE r.id = e.parent_id AND r.state = 'succeeded')
     GROUP BY j.id
)
UPDATE queue_engine_job j
   SET pending_deps = counts.pending, state = 'blocked'
  FROM counts
 WHERE j.id = counts.id
RETURNING j.id
"""


# After a requeue: each blocked node's count of the parents it still waits for,
# recounted from its edges in one snapshot (the flow's countdown rows go).
RECOUNT_FLOW_DEPENDENCIES = """
WITH wiped AS (
    -- What is left of the countdown is recounted below, in this statement's snapshot:
    -- a settle that commits after it leaves its row, and its parent still counted.
    DELETE FROM queue_engine_flowcountdown WHERE flow_id = %(flow)s
), unmarked AS (
    -- So are the children of parents still being counted in chunks (FlowRelease,
    -- FlowRange): a chunk counting now is waited for, and its row then goes too.
    DELETE FROM queue_engine_flowrelease WHERE flow_id = %(flow)s
), unranged AS (
    DELETE FROM queue_engine_flowrange WHERE flow_id = %(flow)s
), counts AS (
    SELECT j.id, count(e.parent_id) AS parents,
           count(e.parent_id) FILTER (WHERE NOT EXISTS (
               SELECT 1 FROM queue_engine_jobrecord r
                WHERE r.id = e.parent_id AND r.state = 'succeeded')) AS pending
      FROM queue_engine_job j
      LEFT JOIN queue_engine_flowedge e ON e.child_id = j.id
     WHERE j.flow_id = %(flow)s AND j.state IN ('blocked', 'available')
     GROUP BY j.id
)
UPDATE queue_engine_job j
   SET pending_deps = counts.pending, parents = counts.parents,
       state = CASE WHEN counts.pending = 0 THEN 'available' ELSE 'blocked' END
  FROM counts
 WHERE j.id = counts.id
RETURNING j.queue, j.state
"""


# Every node of a flow, live or ended, with what a rerun needs to build it again.
FLOW_NODES_FOR_RERUN = """
SELECT id, kind, node_key, payload, queue, priority, name, max_attempts, backoff, group_key,
       labels, meta
  FROM queue_engine_job WHERE flow_id = %(flow)s
UNION ALL
SELECT id, kind, node_key, payload, queue, priority, name, max_attempts, backoff, group_key,
       labels, meta
  FROM queue_engine_jobrecord WHERE flow_id = %(flow)s
"""


# A flow's edges, for a rerun to copy.
FLOW_EDGES = """
SELECT parent_id, child_id, dynamic FROM queue_engine_flowedge WHERE flow_id = %s
"""


# A flow's nodes that succeeded, with their results: what a rerun from a node may reuse.
SUCCEEDED_NODES = """
SELECT node_key, id FROM queue_engine_jobrecord
 WHERE flow_id = %s AND state = 'succeeded' AND node_key IS NOT NULL
"""


# Rerun from a node: the new flow's nodes upstream of the chosen one (or beside it) that
# succeeded in the old flow go to the history as succeeded, never started (NOT_REUSED),
# with the old node's result (their children read it) and where it came from in meta.
REUSE_NODES = f"""
WITH src AS (
    SELECT n.id AS new_id, o.id AS old_id, o.result AS old_result
      FROM queue_engine_job n
      JOIN queue_engine_jobrecord o
        ON o.flow_id = %(old)s AND o.node_key = n.node_key AND o.state = 'succeeded'
     WHERE n.flow_id = %(new)s AND n.node_key = ANY(%(keys)s::varchar[])
), gone AS (
    DELETE FROM queue_engine_job j USING src WHERE j.id = src.new_id
    RETURNING j.*, src.old_id, src.old_result
)
INSERT INTO queue_engine_jobrecord ({MOVED}, state, result, worker, finished_at)
SELECT id, queue, kind, name, priority, payload, attempt, max_attempts, backoff, errors,
       dedup_key, group_key, labels, flow_id, node_key,
       meta || jsonb_build_object('reused_from',
                                  jsonb_build_object('flow', %(old)s::bigint, 'job', old_id)),
       progress, progress_message, rescues, run_at, created_at, NULL,
       'succeeded', old_result, '', now()
  FROM gone
RETURNING id
"""


# The reused nodes' children in the new flow: counted down for them, and released when
# that was all they waited for.
COUNT_DOWN_REUSED = """
WITH counts AS (
    SELECT e.child_id, count(*)::int AS n FROM queue_engine_flowedge e
     WHERE e.flow_id = %(flow)s AND e.parent_id = ANY(%(reused)s::bigint[])
     GROUP BY e.child_id
)
UPDATE queue_engine_job j
   SET pending_deps = j.pending_deps - c.n,
       state = CASE WHEN j.pending_deps - c.n <= 0 THEN 'available' ELSE j.state END,
       run_at = CASE WHEN j.pending_deps - c.n <= 0 THEN GREATEST(j.run_at, now())
                     ELSE j.run_at END
  FROM counts c
 WHERE j.id = c.child_id AND j.state = 'blocked'
RETURNING j.queue, j.state
"""
