"""What `job_result` and `flow_result` read, on a connection that LISTENs to qe_events."""

# A job's end, if it has ended: its state, result and last error; 'live' while it can
# still run; no row for an id that names no job (or whose history retention removed).
# One snapshot: a settle moves the row in one transaction, so it is seen in one table.
JOB_RESULT = """
SELECT r.state, r.result, r.errors -> -1 FROM queue_engine_jobrecord r WHERE r.id = %(id)s
UNION ALL
SELECT 'live', NULL, NULL FROM queue_engine_job j WHERE j.id = %(id)s
LIMIT 1
"""


# A flow's state and, once it has ended, the results of its succeeded leaves (nodes no
# edge leaves from) by node key (the job id for a node without one), and the last
# error of each dead or cancelled node.
FLOW_RESULT = """
SELECT f.state,
       CASE WHEN f.state = 'succeeded' THEN (
           SELECT COALESCE(jsonb_object_agg(COALESCE(r.node_key, r.id::text), r.result),
                           '{}'::jsonb)
             FROM queue_engine_jobrecord r
            WHERE r.flow_id = f.id AND r.state = 'succeeded'
              AND NOT EXISTS (SELECT 1 FROM queue_engine_flowedge e WHERE e.parent_id = r.id))
       END,
       CASE WHEN f.state IN ('failed', 'cancelled') THEN (
           SELECT jsonb_agg(jsonb_build_object('job', r.id, 'node', r.node_key,
                                               'state', r.state, 'error', r.errors -> -1)
                            ORDER BY r.id)
             FROM queue_engine_jobrecord r
            WHERE r.flow_id = f.id AND r.state IN ('failed', 'cancelled'))
       END
  FROM queue_engine_flow f WHERE f.id = %(id)s
"""
