"""A wide fan-out's children left to count after its parent's settle: split into ranges
(FlowRange) that the workers' claims count down as they take the children
(COUNT_DOWN_CLAIM), with the count-down that releases what no claim takes
(COUNT_DOWN_MORE)."""

from queue_engine.sql.flows import (
    _COUNT_DOWN_CHILDREN,
    _COUNTED,
    _NEXT_CHUNKS,
    _RELEASED_NOW,
    _RELEASING_ONE,
    RELEASE_COUNTED,
    _handed,
)
from queue_engine.sql.fragments import CLAIM_CONFIGS, OUTPUTS
from queue_engine.sql.notify import wake_per_queue

# The parent of the FlowRange row in CTE `marker` (columns id, parent_id, after_child,
# upto_child), as CTE `parents` for _NEXT_CHUNKS, with its output from the
# history, read once a chunk (none, and nothing handed down, if its row is gone).
_MARKER_PARENTS = f"""
parents AS (
    SELECT m.parent_id AS id, m.after_child AS after, m.upto_child AS upto, h.node_key,
           h.result, COALESCE(x.handed, false) AS handed,
           CASE WHEN x.handed THEN jsonb_build_object(h.node_key, h.result) END AS output
      FROM marker m
      LEFT JOIN LATERAL (
           SELECT h.node_key, h.result FROM queue_engine_jobrecord h
            WHERE h.id = m.parent_id AND h.state = 'succeeded' LIMIT 1) h ON true
     CROSS JOIN LATERAL (SELECT {_handed("h.node_key", "h.result")} AS handed) x
)"""


def _move_marker(touch: str) -> str:
    """The marker row (a FlowRange) moved on past the chunk in `counting` (`touch` sets
    its touched_at too), or deleted after the last child of its range."""
    return f"""
advanced AS (
    UPDATE queue_engine_flowrange m SET after_child = c.child_id{touch}
      FROM counting c
     WHERE m.id = (SELECT id FROM marker) AND c.nth = %(chunk)s::int
       AND EXISTS (SELECT 1 FROM counting d WHERE d.nth > %(chunk)s::int)
), finished AS (
    DELETE FROM queue_engine_flowrange m
     WHERE m.id = (SELECT id FROM marker)
       AND NOT EXISTS (SELECT 1 FROM counting d WHERE d.nth > %(chunk)s::int)
)"""


# How long the FlowRange rows of a parent may go untouched by claims
# (sql.COUNT_DOWN_CLAIM) before the count-down releases its children without them: the
# longest that runnable children of a fan-out stay blocked while no worker has room for
# them.
RELEASE_GRACE = 0.5


# The next chunk of a range of one parent's children (a FlowRange row, see
# SPLIT_RELEASES), in a transaction of its own: counted down as a settle counts them,
# the row moved on past them (or deleted after the last), and the other workers woken
# for the children it made available. Only ranges of parents none of whose ranges a
# claim has counted from for %(grace)s seconds (RELEASE_GRACE): while the workers'
# claims take a fan-out's children as they count them down (COUNT_DOWN_CLAIM), this is
# the net under them, for children nobody has room for. Rows another worker is counting
# are skipped. Returns whether a row was found, the children released, the wake-ups
# sent, and the flows whose countdown rows RELEASE_COUNTED must then look at: those this
# chunk added rows to (a child that also waits for other parents), none for a plain
# fan-out.
COUNT_DOWN_MORE = f"""
WITH marker AS (
    SELECT m.id, m.parent_id, m.after_child, m.upto_child FROM queue_engine_flowrange m
     WHERE NOT EXISTS (
           SELECT 1 FROM queue_engine_flowrange t
            WHERE t.parent_id = m.parent_id
              AND t.touched_at > now() - make_interval(secs => %(grace)s))
     ORDER BY m.id LIMIT 1
       FOR UPDATE SKIP LOCKED
), {_MARKER_PARENTS}, {_NEXT_CHUNKS}, {_RELEASING_ONE}, {_COUNT_DOWN_CHILDREN},
{_move_marker("")}, woken AS ({wake_per_queue("released", "w.state = 'available'")}
)
SELECT (SELECT count(*) FROM marker), (SELECT count(*) FROM released),
       (SELECT count(*) FROM woken),
       COALESCE((SELECT array_agg(DISTINCT c.flow_id) FROM counted c), '{{}}')
"""


# Whether any FlowRelease or FlowRange row is left.
RELEASES_LEFT = """
SELECT 1 WHERE EXISTS (SELECT 1 FROM queue_engine_flowrelease)
            OR EXISTS (SELECT 1 FROM queue_engine_flowrange)
"""


# The FlowRelease rows settles wrote (each the rest of a parent's children, past its
# first chunk), split into FlowRange rows of %(chunk)s children each, which claims count
# down side by side (COUNT_DOWN_CLAIM); the FlowRelease rows go. A row a worker of an
# earlier version is counting down is waited for, then split from where it got to.
# Returns the ranges written.
SPLIT_RELEASES = """
WITH whole AS (
    SELECT m.id, m.flow_id, m.parent_id, m.after_child FROM queue_engine_flowrelease m
     ORDER BY m.id
       FOR UPDATE
), numbered AS (
    SELECT w.id, w.flow_id, w.parent_id, e.child_id,
           row_number() OVER (PARTITION BY w.id ORDER BY e.child_id) AS nth,
           count(*) OVER (PARTITION BY w.id) AS total
      FROM whole w
      JOIN queue_engine_flowedge e ON e.parent_id = w.parent_id AND e.child_id > w.after_child
), ends AS (
    -- Each range's last child (every %(chunk)s-th, and the parent's last) and the
    -- child before its first (the previous range's last; the row's own for the first).
    SELECT n.id, n.flow_id, n.parent_id, n.child_id AS upto,
           lag(n.child_id) OVER (PARTITION BY n.id ORDER BY n.nth) AS after
      FROM numbered n
     WHERE mod(n.nth, %(chunk)s::int) = 0 OR n.nth = n.total
), gone AS (
    DELETE FROM queue_engine_flowrelease m USING whole w WHERE m.id = w.id
), ranges AS (
    INSERT INTO queue_engine_flowrange (flow_id, parent_id, after_child, upto_child)
    SELECT e.flow_id, e.parent_id, COALESCE(e.after, w.after_child), e.upto
      FROM ends e JOIN whole w ON w.id = e.id
     ORDER BY e.id, e.upto
    RETURNING 1
)
SELECT count(*) FROM ranges
"""


# A child that COUNT_DOWN_CLAIM's count releases (_RELEASED_NOW) and that it takes.
_TAKEN = f"r.take AND {_RELEASED_NOW}"


# A claim that counts down the next %(chunk)s children of a range (FlowRange) and takes
# at once those it may run, as the claim of available jobs would take them: each child
# that this count releases goes straight to running for this worker (one write, where a
# release and a claim are two), if
# - its queue is one of the worker's, not paused, and has no limits (a limited queue's
#   claims count its running jobs and starts under its lock, sql.CLAIM);
# - its kind is not paused, the worker has the labels it needs, it is due (run_at),
#   and it is no suspect;
# - no runnable job waits in the worker's queues at its priority or above: released,
#   it would have the latest run time of all, and go after them (`ahead`); for a
#   worker with weighted queues (%(weighted)s), which ranks them by turn first, none
#   at all.
# Every other child is counted down as COUNT_DOWN_MORE counts it: available, with a
# wake-up, or a countdown row, whose flows go to qe.counted for RELEASE_COUNTED_NOTED
# after the commit. The range moves on and is marked touched: the count-down's net
# (COUNT_DOWN_MORE) leaves it to the claims while they come. A chunk is the worker's
# free slots (%(chunk)s = the claim's limit): nothing it takes exceeds them.
# Returns the claim's rows (sql.CLAIM's columns) and one marker row: 'counted', with the
# children counted in the attempt's place (0: no range was free).
COUNT_DOWN_CLAIM = f"""
WITH marker AS (
    SELECT m.id, m.parent_id, m.after_child, m.upto_child FROM queue_engine_flowrange m
     ORDER BY m.id LIMIT 1
       FOR UPDATE SKIP LOCKED
), {_MARKER_PARENTS}, {_NEXT_CHUNKS}, {_RELEASING_ONE}, {CLAIM_CONFIGS}, paused AS (
    SELECT array_agg(kind) AS kinds FROM queue_engine_kindcontrol WHERE paused
), ahead AS (
    -- The best priority among the runnable jobs waiting in the worker's queues.
    SELECT max(a.priority) AS priority
      FROM configs c CROSS JOIN LATERAL (
           SELECT a.priority FROM queue_engine_job a
            WHERE a.state = 'available' AND a.queue = c.name AND a.run_at <= now()
            ORDER BY a.priority DESC LIMIT 1) a
), taking AS MATERIALIZED (
    -- The chunk's children with their counts and whether each is taken: the update
    -- below joins this alone (a join of two CTEs is planned as a loop over both).
    SELECT r.child_id, r.flow_id, r.n, r.outputs,
           COALESCE(NOT (c.capped OR c.fair_share) AND j.run_at <= now() AND j.rescues < 2
                    AND (j.labels = '{{}}' OR j.labels <@ %(labels)s::varchar[])
                    AND (p.kinds IS NULL OR j.kind <> ALL(p.kinds))
                    AND j.priority > COALESCE((SELECT priority FROM ahead), -2147483648)
                    -- A worker with weighted queues ranks its queues' jobs by turn
                    -- before priority: it takes children only while no job waits.
                    AND NOT (%(weighted)s AND (SELECT priority FROM ahead) IS NOT NULL),
                    false) AS take,
           c.lock_duration
      FROM releasing r
      JOIN queue_engine_job j ON j.id = r.child_id
      LEFT JOIN configs c ON c.name = j.queue
     CROSS JOIN paused p
), released AS (
    -- As _COUNT_DOWN_CHILDREN, and the claim's columns for a child taken (`take`) as
    -- this count releases it.
    UPDATE queue_engine_job j
       SET pending_deps = j.pending_deps - r.n,
           state = CASE WHEN {_RELEASED_NOW}
                        THEN CASE WHEN r.take THEN 'running' ELSE 'available' END
                        ELSE j.state END,
           run_at = CASE WHEN {_RELEASED_NOW}
                         THEN GREATEST(j.run_at, now()) ELSE j.run_at END,
           parent_outputs = CASE WHEN {_RELEASED_NOW}
                                 THEN CASE WHEN r.n = j.parents THEN r.outputs END
                                 ELSE j.parent_outputs END,
           attempt = j.attempt + CASE WHEN {_TAKEN} THEN 1 ELSE 0 END,
           lease_owner = CASE WHEN {_TAKEN}
                              THEN %(worker)s ELSE j.lease_owner END,
           claim_token = CASE WHEN {_TAKEN}
                              THEN %(token)s ELSE j.claim_token END,
           started_at = CASE WHEN {_TAKEN}
                             THEN clock_timestamp() ELSE j.started_at END,
           heartbeat_at = CASE WHEN {_TAKEN} THEN now() ELSE j.heartbeat_at END,
           lease_expires_at = CASE WHEN {_TAKEN}
                                   THEN now() + make_interval(secs => r.lock_duration)
                                   ELSE j.lease_expires_at END
      FROM taking r
     WHERE j.id = r.child_id AND j.pending_deps <= r.n
    RETURNING j.id, j.queue, j.labels, j.priority, j.run_at, j.state, r.flow_id, r.n,
              r.outputs, j.kind, j.payload, j.attempt, j.max_attempts, j.backoff::text AS backoff,
              j.node_key, j.meta::text AS meta, j.claim_token,
              {OUTPUTS} AS claim_outputs,
              r.lock_duration,
              CASE WHEN j.meta ? 'has_steps' THEN (
                  SELECT jsonb_object_agg(s.name, s.result)::text
                    FROM queue_engine_jobstep s WHERE s.job_id = j.id) END AS steps
), {_COUNTED}, {_move_marker(", touched_at = now()")},
woken AS ({wake_per_queue("released", "w.state = 'available'")}
), noted AS (
    SELECT set_config('qe.counted', COALESCE(
               (SELECT array_agg(DISTINCT c.flow_id) FROM counted c), '{{}}')::text, false)
)
SELECT l.id, l.kind, l.queue, l.payload, l.attempt, l.max_attempts, l.backoff, l.flow_id,
       l.node_key, l.meta, l.claim_outputs, l.lock_duration, l.steps, l.priority, l.run_at
  FROM released l
 WHERE l.state = 'running' AND l.claim_token = %(token)s
 UNION ALL
SELECT NULL, 'counted', NULL, NULL, (SELECT count(*) FROM releasing)::int, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM noted, (SELECT count(*) FROM woken) w
"""


# RELEASE_COUNTED for the flows the COUNT_DOWN_CLAIM before it in the message noted
# (qe.counted), after its commit.
RELEASE_COUNTED_NOTED = RELEASE_COUNTED.replace(
    "%s::bigint[]", "COALESCE(NULLIF(current_setting('qe.counted', true), ''), '{}')::bigint[]"
)
