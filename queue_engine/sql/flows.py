"""Flow statements: submit, release dependants on settle, keep flow state true."""

from queue_engine.sql.fragments import (
    RUNNING,
    SUCCEEDED_DONE,
    SUCCEEDED_MOVE,
    at,
)
from queue_engine.sql.notify import wake_per_queue

# A parent's output is handed down to its children (Job.parent_outputs) up to this many
# bytes: a larger one is read from the history by each child, not copied into every
# child's row (a fan-out's thousands).
HAND_DOWN_BYTES = 1024


def _handed(node_key: str, result: str) -> str:
    """Whether a parent's output is handed down: it has a key to go under, and it is
    small, as stored: a value the history keeps compressed may be much larger once read.
    A result of SQL NULL (none recorded) goes down as JSON null, as the history look-up
    gives it."""
    return (
        f"({node_key} IS NOT NULL AND COALESCE(pg_column_size({result}) <= {HAND_DOWN_BYTES}"
        f" AND pg_column_compression({result}) IS NULL, true))"
    )


# A flow's own row; its nodes and edges follow in the same transaction.
INSERT_FLOW = """
INSERT INTO queue_engine_flow (name, default_priority, meta, rerun_of)
VALUES (%s, %s, %s::jsonb, %s)
RETURNING id
"""


# A flow's edges, parent to child, in one statement (`dynamic` marks a join's spawned
# children).
INSERT_EDGES = """
INSERT INTO queue_engine_flowedge (flow_id, parent_id, child_id, dynamic)
SELECT %s, p, c, %s FROM unnest(%s::bigint[], %s::bigint[]) AS e(p, c)
"""


# Succeeded flow nodes: move them to history (fenced, as SETTLE_SUCCEEDED) and
# count down their children in the same statement. Nobody is woken here: the worker's
# message claims next, and only then wakes the others for what it left (sql.WAKE_LEFT,
# from the queues NOTE_RELEASED noted).
# - Each parent's first %(chunk)s children (FLOW_RELEASE_CHUNK, in child id order) are
#   counted here; a parent with more leaves a FlowRelease row for the rest (_MARK_REST),
#   which its worker splits into ranges (SPLIT_RELEASES) that the claims count down as
#   they take the children (COUNT_DOWN_CLAIM), after this commits.
# - A child none of whose other parents is still pending (every parent it waits for
#   is counted here: a chain's next node, a fan-out's children) is updated here;
#   it becomes available when its count reaches zero. No other settle touches it, so
#   it is not locked first (a lock pass over a wide fan-out's children costs more than
#   the update itself).
# - A child that still waits for parents settling elsewhere (a fan-in's join) gets a
#   FlowCountdown row instead: an insert, which waits for nobody. RELEASE_COUNTED,
#   run right after this commits, releases it once its rows add up.
# - Each parent's output goes with its count (CTE `releasing`), when it is small
#   (HAND_DOWN_BYTES): onto the child's row as it is released (Job.parent_outputs), or
#   into its countdown row, which RELEASE_COUNTED gathers onto the row. The claim then
#   hands a node its parents' outputs without a look into the history per parent,
#   which reads every leaf of the partitioned history (sql/fragments.py, OUTPUTS).
# The children of the flow nodes in CTE `parents` (columns `id`; `after`, the last
# child already counted, 0 for none; `upto`, the last child of its range, NULL for
# all; the parent's `node_key` and `result`; and `handed`, whether the result is
# handed down: _handed), as CTE `counting`: each parent's next chunk and one child
# more, numbered per parent.
_NEXT_CHUNKS = """
counting AS (
    SELECT e.parent_id, e.child_id, e.flow_id, p.node_key, p.result, p.handed,
           row_number() OVER (PARTITION BY e.parent_id ORDER BY e.child_id) AS nth
      FROM parents p CROSS JOIN LATERAL (
            SELECT e.parent_id, e.child_id, e.flow_id FROM queue_engine_flowedge e
             WHERE e.parent_id = p.id AND e.child_id > p.after
               -- A bound the index scan stops at (an OR of the two would read the
               -- parent's edges whole and sort them).
               AND e.child_id <= COALESCE(p.upto, 9223372036854775807)
             ORDER BY e.child_id LIMIT %(chunk)s::int + 1) e
)"""


# The children numbered 1 to %(chunk)s in CTE `counting`, each once, with how many of
# its parents count it down here and their outputs (all of them, or none).
_RELEASING_MANY = """
releasing AS (
    SELECT c.child_id, min(c.flow_id) AS flow_id, count(*) AS n,
           CASE WHEN bool_and(c.handed) THEN
                jsonb_object_agg(c.node_key, c.result) FILTER (WHERE c.handed) END AS outputs
      FROM counting c WHERE c.nth <= %(chunk)s::int
     GROUP BY c.child_id
)"""


# The same for the children of one parent (a chunk of a wide fan-out), whose CTE
# `parents` also gives its `output` as it is handed down: each child is there once (an
# edge is unique), with that output, and nothing to group.
_RELEASING_ONE = """
releasing AS (
    SELECT c.child_id, c.flow_id, 1::bigint AS n, p.output AS outputs
      FROM counting c JOIN parents p ON p.id = c.parent_id
     WHERE c.nth <= %(chunk)s::int
)"""


# The children in CTE `releasing` that CTE `released` did not update (they wait for
# other parents too): a countdown row each.
_COUNTED = """
counted AS (
    -- The children not updated above, as a set difference: both sides are CTEs the
    -- planner guesses at one row, and as an anti-join it would compare every pair of
    -- a chunk.
    INSERT INTO queue_engine_flowcountdown (flow_id, child_id, n, outputs)
    SELECT d.flow_id, d.child_id, d.n, d.outputs FROM (
        SELECT r.child_id, r.flow_id, r.n, r.outputs FROM releasing r
        EXCEPT ALL
        SELECT l.id, l.flow_id, l.n, l.outputs FROM released l
    ) d
    RETURNING flow_id
)"""


# Whether the update of job `j` by `releasing` row `r` releases it: it waits, and for
# no parent but those this count counts (checked on the row as locked).
_RELEASED_NOW = "j.state = 'blocked' AND j.pending_deps - r.n <= 0"


# Count down the children in CTE `releasing`.
_COUNT_DOWN_CHILDREN = f"""
released AS (
    -- No lock taken first: nothing else counts these children down (every parent
    -- they still wait for is in this settle). A child whose count grew meanwhile (a
    -- dynamic join) fails the re-checked condition and is counted by a row instead.
    UPDATE queue_engine_job j
       SET pending_deps = j.pending_deps - r.n,
           state = CASE WHEN {_RELEASED_NOW}
                        THEN 'available' ELSE j.state END,
           run_at = CASE WHEN {_RELEASED_NOW}
                         THEN GREATEST(j.run_at, now()) ELSE j.run_at END,
           -- Handed down if this settle counted every parent the child has; else
           -- (some counted another way) none, and the claim reads them all.
           parent_outputs = CASE WHEN {_RELEASED_NOW}
                                 THEN CASE WHEN r.n = j.parents THEN r.outputs END
                                 ELSE j.parent_outputs END
      FROM releasing r
     WHERE j.id = r.child_id AND j.pending_deps <= r.n
    RETURNING j.id, j.queue, j.labels, j.priority, j.run_at, j.state, r.flow_id, r.n,
              r.outputs
), {_COUNTED}
"""


# The parents in `counting` with children past the chunk: a FlowRelease row each,
# after the last child counted.
_MARK_REST = """
marked AS (
    INSERT INTO queue_engine_flowrelease (flow_id, parent_id, after_child)
    SELECT c.flow_id, c.parent_id, c.child_id FROM counting c
     WHERE c.nth = %(chunk)s::int
       AND EXISTS (SELECT 1 FROM counting d
                    WHERE d.parent_id = c.parent_id AND d.nth > %(chunk)s::int)
    RETURNING 1
)"""


# The queues of the children a countdown made available, added to the session's
# qe.released for sql.WAKE_LEFT later in the same message (one name per queue: a
# fan-out's root releasing 10,000 children notes one queue, so WAKE_LEFT need not
# walk its 10,000 edges again to find them). Set outside the settle's transaction
# scope (is_local false) so the claim's transaction after its commit reads it; an
# aborted settle takes its note back with it.
NOTE_RELEASED = """
SELECT set_config('qe.released', (
           COALESCE(NULLIF(current_setting('qe.released', true), ''), '{}')::varchar[]
           || array_agg(DISTINCT l.queue) FILTER (WHERE l.state = 'available'))::text, false)
  FROM released l
"""


# Succeeded flow nodes: moved to the history like SETTLE_SUCCEEDED, fenced by their
# claim token, and their children counted down in the same transaction (see above).
SETTLE_SUCCEEDED_FLOW = f"""
WITH {SUCCEEDED_DONE}, moved AS ({SUCCEEDED_MOVE}
), parents AS (
    SELECT id, 0::bigint AS after, NULL::bigint AS upto, node_key, d_result AS result,
           {_handed("node_key", "d_result")} AS handed
      FROM done
), {_NEXT_CHUNKS}, {_RELEASING_MANY},
{_COUNT_DOWN_CHILDREN}, {_MARK_REST}
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM released), ({NOTE_RELEASED}),
       (SELECT count(*) FROM marked)
"""


# A flow node that ctx.atomic() completed in the handler's own transaction: its
# return value is recorded now, and only now are its children counted down (released
# earlier, a child would have read a parent output not there yet). Recording happens
# once (the result is NULL until then), so a retried settle counts nothing twice.
RECORD_RESULT_FLOW = f"""
WITH parents AS (
    UPDATE queue_engine_jobrecord r
       SET result = COALESCE((%(results)s::jsonb[])[{at("r")}], 'null'::jsonb)
     WHERE r.id = ANY(%(ids)s::bigint[]) AND r.result IS NULL AND r.state = 'succeeded'
    RETURNING r.id, 0::bigint AS after, NULL::bigint AS upto, r.node_key, r.result,
              {_handed("r.node_key", "r.result")} AS handed
), {_NEXT_CHUNKS}, {_RELEASING_MANY}, {_COUNT_DOWN_CHILDREN}, {_MARK_REST}
SELECT (SELECT count(*) FROM parents), (SELECT count(*) FROM released), ({NOTE_RELEASED}),
       (SELECT count(*) FROM marked)
"""


# After a settle with countdown rows has committed, in a statement of its own (a fresh
# snapshot, as REFRESH_FLOWS): release the blocked children of these flows whose rows
# add up to what they wait for, and drop those rows. Two workers settling a join's
# last parents at once each miss the other's row inside their own transaction; the
# release that starts last sees both. A child another release is taking is waited
# for, then skipped (no longer blocked). So is a child whose row changed after this
# statement's snapshot (its xmin differs once locked): its sums were read in that
# snapshot, and a requeue that committed since recounted its pending_deps and dropped
# the rows those sums hold (counted again, they would release a join before its
# requeued parent). The change's own settles, or the leader's net, release it later.
RELEASE_COUNTED = f"""
WITH sums AS (
    SELECT c.child_id, sum(c.n) AS n FROM queue_engine_flowcountdown c
     WHERE c.flow_id = ANY(%s::bigint[])
     GROUP BY c.child_id
     ORDER BY c.child_id
), ready AS (
    -- Each child looked up by its key alone, in id order (the order locks are taken
    -- in): with the state in the lookup, the planner may read the index of blocked
    -- jobs instead, all of them, at every settle of a flow node (OFFSET 0 keeps the
    -- checks out of the lookups). `seen` is the child's row in the snapshot, `x` its
    -- newest version. Only a child whose rows add up in the snapshot is locked, and
    -- checked again once locked: a join that still waits for other parents (every
    -- settle of a wide fan-in's parents but the last) is read, not locked, and the
    -- statement writes nothing, so its commit has nothing to wait for.
    SELECT x.id FROM sums s
     CROSS JOIN LATERAL (
        SELECT j.state, j.pending_deps, j.xmin FROM queue_engine_job j
         WHERE j.id = s.child_id
        OFFSET 0) seen
     CROSS JOIN LATERAL (
        SELECT j.id, j.state, j.pending_deps, j.xmin FROM queue_engine_job j
         WHERE j.id = s.child_id
        OFFSET 0
           FOR UPDATE) x
     WHERE seen.state = 'blocked' AND seen.pending_deps <= s.n
       AND x.state = 'blocked' AND x.pending_deps <= s.n AND x.xmin = seen.xmin
), released AS (
    UPDATE queue_engine_job j
       SET pending_deps = 0, state = 'available', run_at = GREATEST(j.run_at, now()),
           -- The outputs its rows carry, read in this statement's snapshot, as the sums
           -- were: if they count every parent it has and each row carries its
           -- parents' outputs, all of them, else none (the claim reads them all).
           parent_outputs = (
               SELECT CASE WHEN bool_and(c.outputs IS NOT NULL) AND sum(c.n) = j.parents
                           THEN (SELECT jsonb_object_agg(o.key, o.value)
                                   FROM queue_engine_flowcountdown d
                                  CROSS JOIN LATERAL jsonb_each(d.outputs) o
                                  WHERE d.child_id = j.id) END
                 FROM queue_engine_flowcountdown c WHERE c.child_id = j.id)
     WHERE j.id = ANY(ARRAY(SELECT id FROM ready))
    RETURNING j.id, j.queue, j.labels, j.priority, j.run_at
), cleared AS (
    DELETE FROM queue_engine_flowcountdown c USING released r WHERE c.child_id = r.id
), woken AS ({wake_per_queue("released")}
)
SELECT (SELECT count(*) FROM released), (SELECT count(*) FROM woken)
"""


# The leader's net under RELEASE_COUNTED (a worker that died between its settle's
# commit and the release) and its cleanup: rows of children that are no longer
# blocked (cancelled, removed, released) go.
COUNTDOWN_FLOWS = "SELECT DISTINCT flow_id FROM queue_engine_flowcountdown"


# Countdown rows whose child waits no more (released, removed or rerun): nothing reads
# them again. An upstream_failed child keeps them for when it waits again.
PRUNE_COUNTDOWNS = """
DELETE FROM queue_engine_flowcountdown c
 WHERE NOT EXISTS (SELECT 1 FROM queue_engine_job j
                    WHERE j.id = c.child_id AND j.state IN ('blocked', 'upstream_failed'))
"""


# A flow's state from its nodes: failed once a node is dead; cancelled once a node was
# cancelled and no node can run any more (none available, scheduled or running: what
# is left waits on a dead or cancelled node); succeeded when no node is left in the
# live table; else running. It finishes (finished_at) when no node can run any more,
# so a failed flow whose other branches still run has no end time yet.
REFRESH_FLOWS = """
UPDATE queue_engine_flow f
   SET state = s.state,
       finished_at = CASE WHEN s.settled THEN COALESCE(f.finished_at, now()) END
  FROM (
    SELECT x.id, x.state,
           x.state <> 'running' AND NOT EXISTS (
               SELECT 1 FROM queue_engine_job j
                WHERE j.flow_id = x.id AND j.state IN ('available', 'scheduled', 'running')
           ) AS settled
      FROM (
        SELECT f2.id,
               CASE WHEN EXISTS (SELECT 1 FROM queue_engine_jobrecord r
                                  WHERE r.flow_id = f2.id AND r.state = 'failed')
                         THEN 'failed'
                    WHEN EXISTS (SELECT 1 FROM queue_engine_jobrecord r
                                  WHERE r.flow_id = f2.id AND r.state = 'cancelled')
                     AND NOT EXISTS (SELECT 1 FROM queue_engine_job j
                                      WHERE j.flow_id = f2.id
                                        AND j.state IN ('available', 'scheduled', 'running'))
                         THEN 'cancelled'
                    WHEN NOT EXISTS (SELECT 1 FROM queue_engine_job j WHERE j.flow_id = f2.id)
                         THEN CASE WHEN f2.removed_nodes > 0 THEN 'cancelled'
                                   ELSE 'succeeded' END
                    ELSE 'running' END AS state
          FROM queue_engine_flow f2
         WHERE f2.id = ANY(%s::bigint[])
      ) x
  ) s
 WHERE f.id = s.id
   AND (f.state IS DISTINCT FROM s.state OR (f.finished_at IS NOT NULL) <> s.settled)
RETURNING f.id, f.state
"""


# Every node downstream of these jobs (through live edges), for cascading cancels.
DESCENDANTS = """
WITH RECURSIVE down(id) AS (
    SELECT unnest(%s::bigint[])
    UNION
    SELECT e.child_id FROM queue_engine_flowedge e JOIN down ON e.parent_id = down.id
)
SELECT id FROM down
"""


# Dynamic join: a running node that holds an edge into the join adds a child that
# the join must now also wait for. Fenced: only while the spawner still runs
# under the caller's claim token.
LOCK_SPAWNER = f"""
SELECT j.flow_id, f.default_priority
  FROM queue_engine_job j JOIN queue_engine_flow f ON f.id = j.flow_id
 WHERE j.id = %s AND j.claim_token = %s AND j.state = {RUNNING}
   FOR SHARE OF j
"""


# The join a spawner's flow node feeds, by its key: the child that must also wait for
# what the spawner adds.
JOIN_HELD_BY = """
SELECT e.child_id FROM queue_engine_flowedge e
  JOIN queue_engine_job j ON j.id = e.child_id
 WHERE e.parent_id = %s AND j.flow_id = %s AND j.node_key = %s
"""


# A join waits for that many more parents (children a running node spawned).
ADD_PENDING = """
UPDATE queue_engine_job j SET pending_deps = j.pending_deps + a.n, parents = j.parents + a.n
  FROM (SELECT %s::int AS n) a
 WHERE j.id = %s
"""


# The columns a flow's submit writes per node, in COPY_FLOW_JOBS' order.
FLOW_COPY_COLUMNS = (
    "id, queue, kind, name, priority, payload, max_attempts, backoff, dedup_key, group_key, "
    "labels, meta, run_at, state, flow_id, node_key, pending_deps, parents"
)


# A flow's nodes, written with COPY in the submit's transaction.
COPY_FLOW_JOBS = f"COPY queue_engine_job ({FLOW_COPY_COLUMNS}) FROM STDIN"


# The flows these ended jobs belonged to: the rescue refreshes their state.
FLOWS_OF_RECORDS = """
SELECT DISTINCT flow_id FROM queue_engine_jobrecord
 WHERE id = ANY(%s::bigint[]) AND flow_id IS NOT NULL
"""


# spawn_into only: node keys are unique in a flow (a join's ctx.outputs is keyed by
# them), and no constraint says so (a node moves between the live and history
# tables). Spawns into one flow take this lock, then read the flow's nodes with those
# keys in a fresh snapshot, so two spawns cannot both add a key. An advisory lock,
# not the flow row: a settle updates the join, then the flow row (REFRESH_FLOWS), in
# one transaction, and a spawn updates the join after this.
LOCK_FLOW_KEYS = (
    "SELECT pg_advisory_xact_lock(hashtextextended('queue_engine.flow_keys:' || %s, 0))"
)


# The flow's nodes with these keys: their id, key, the job that spawned them (meta
# spawned_by, none for declared nodes), and whether they have an edge into the join.
FLOW_NODES_WITH_KEYS = """
SELECT n.id, n.node_key, n.meta->>'spawned_by',
       EXISTS (SELECT 1 FROM queue_engine_flowedge e
                WHERE e.parent_id = n.id AND e.child_id = %(join)s AND e.dynamic)
  FROM (SELECT id, node_key, meta FROM queue_engine_job
         WHERE flow_id = %(flow)s AND node_key = ANY(%(keys)s::varchar[])
        UNION ALL
        SELECT id, node_key, meta FROM queue_engine_jobrecord
         WHERE flow_id = %(flow)s AND node_key = ANY(%(keys)s::varchar[])) n
"""
