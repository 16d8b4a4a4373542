"""The history's partitions: what exists, and the windows that decide when one goes.

queue_engine_jobrecord is partitioned by state (LIST), and each state's table by
finish time (RANGE) into leaves, with a DEFAULT leaf per state for rows no leaf
covers. queue_engine.schema.partitions plans the leaves; the statements that create and drop
one are built there, as DDL takes no bound parameters.
"""

# Every ranged leaf of the history and of the log lines: its parent (the state's table,
# or the log table), name and bounds. The bounds come from
# the catalog's text of the partition bound, whose literals carry their UTC offset,
# so the casts give the same instants whatever the session's time zone.
HISTORY_LEAVES = r"""
SELECT s.relname, c.relname,
       substring(b.bound from $$FROM \('([^']+)'\)$$)::timestamptz,
       substring(b.bound from $$TO \('([^']+)'\)$$)::timestamptz
  FROM pg_inherits top
  JOIN pg_class s ON s.oid = top.inhrelid
  JOIN pg_inherits i ON i.inhparent = s.oid
  JOIN pg_class c ON c.oid = i.inhrelid
 CROSS JOIN LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS bound) b
 WHERE top.inhparent = 'queue_engine_jobrecord'::regclass AND b.bound <> 'DEFAULT'
UNION ALL
SELECT 'queue_engine_joblog', c.relname,
       substring(b.bound from $$FROM \('([^']+)'\)$$)::timestamptz,
       substring(b.bound from $$TO \('([^']+)'\)$$)::timestamptz
  FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
 CROSS JOIN LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS bound) b
 WHERE i.inhparent = 'queue_engine_joblog'::regclass AND b.bound <> 'DEFAULT'
 ORDER BY 1, 3
"""


# The retention windows in force, in seconds per ended state: every queue's, and
# those a queue first seen by an enqueue starts with.
HISTORY_WINDOWS = """
SELECT retain_succeeded, retain_failed, retain_cancelled FROM queue_engine_queueconfig
UNION ALL
SELECT retain_succeeded, retain_failed, retain_cancelled FROM queue_engine_queuedefaults
"""


# The database clock and the rollup's watermark: a leaf goes only once the rollup
# has counted every row in it.
HISTORY_CLOCK = """
SELECT now(), (SELECT rolled_up_to FROM queue_engine_rollupstate WHERE name = 'metrics')
"""


def emptied_flows(flow_ids: str, going: str) -> str:
    """Common table expressions that delete, with their edges, the ended flows among
    `flow_ids` (a query) that have no node left once the history rows matching `going`
    (a condition on `r`) are gone, deleted by the same statement or just before it: a
    flow goes with its last node."""
    return f"""emptied AS (
    SELECT f.id FROM queue_engine_flow f
     WHERE f.id IN ({flow_ids}) AND f.state <> 'running'
       AND NOT EXISTS (SELECT 1 FROM queue_engine_job j WHERE j.flow_id = f.id)
       AND NOT EXISTS (SELECT 1 FROM queue_engine_jobrecord r
                        WHERE r.flow_id = f.id AND NOT ({going}))
       FOR UPDATE OF f SKIP LOCKED
), emptied_edges AS (
    DELETE FROM queue_engine_flowedge e USING emptied WHERE e.flow_id = emptied.id
), emptied_flows AS (
    DELETE FROM queue_engine_flow f USING emptied WHERE f.id = emptied.id
)"""
