"""Flow nodes that can no longer run: marked `upstream_failed` when an ancestor ends dead
or cancelled, with that ancestor in meta `upstream`, and back to `blocked` when an
operator brings the ancestor back (redrive, retry, requeue_flow)."""


def _mark(roots: str) -> str:
    """Mark the blocked descendants of the dead and cancelled flow nodes `roots` selects
    (a query of queue_engine_jobrecord r), through live nodes only: a node past another
    ended one is that one's to mark. Each names one cause: a dead ancestor before a
    cancelled one, then the lowest id."""
    return f"""
WITH RECURSIVE roots AS (
    SELECT r.id, r.node_key, r.state FROM queue_engine_jobrecord r
     WHERE {roots} AND r.flow_id IS NOT NULL AND r.state IN ('failed', 'cancelled')
), down(root, id) AS (
    SELECT ro.id, e.child_id FROM roots ro
      JOIN queue_engine_flowedge e ON e.parent_id = ro.id
    UNION
    SELECT d.root, e.child_id FROM down d
      JOIN queue_engine_job j ON j.id = d.id AND j.state IN ('blocked', 'upstream_failed')
      JOIN queue_engine_flowedge e ON e.parent_id = d.id
), causes AS (
    SELECT DISTINCT ON (d.id) d.id, ro.id AS job, ro.node_key AS key, ro.state
      FROM down d JOIN roots ro ON ro.id = d.root
     ORDER BY d.id, ro.state = 'failed' DESC, ro.id
)
UPDATE queue_engine_job j
   SET state = 'upstream_failed',
       meta = j.meta || jsonb_build_object(
           'upstream', jsonb_build_object('job', c.job, 'key', c.key, 'state', c.state))
  FROM causes c
 WHERE j.id = c.id AND j.state = 'blocked'
RETURNING j.id
"""


# In the settle that ends flow nodes dead or cancelled (and in the rescuer's): what waits
# on them can no longer run. Only failing flow nodes pay for it.
MARK_UPSTREAM_FAILED = _mark("r.id = ANY(%(ids)s::bigint[])")


# After an operator action on flows: their marks again from the nodes that are dead or
# cancelled now (UNMARK_UPSTREAM_FAILED first).
MARK_UPSTREAM_FAILED_IN_FLOWS = _mark("r.flow_id = ANY(%(flows)s::bigint[])")


# Every node of these flows that could no longer run waits again, as blocked, with the
# count of parents it kept all along (settles count its parents down whatever its state,
# and keep its countdown rows: sql.PRUNE_COUNTDOWNS).
UNMARK_UPSTREAM_FAILED = """
UPDATE queue_engine_job j SET state = 'blocked', meta = j.meta - 'upstream'
 WHERE j.flow_id = ANY(%(flows)s::bigint[]) AND j.state = 'upstream_failed'
RETURNING j.id
"""
