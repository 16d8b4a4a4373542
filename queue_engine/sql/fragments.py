"""Pieces more than one statement shares, each defined once, and the helpers that turn
statements into what psycopg and the worker's prepared statements take.
"""

import re
from collections.abc import Iterable
from typing import Any

# psycopg parses a query's %(name)s placeholders once and caches the result, but only
# for texts of up to 4,096 bytes: a longer one is parsed again on every execute. (The
# worker's statements are prepared by name instead: see worker/script.py.)
CACHEABLE_BYTES = 4096


_NAMED = re.compile(r"%\((\w+)\)s")


def numbered(statement: str) -> tuple[str, list[str]]:
    """A statement with %(name)s placeholders as $n text, and the names in $n order: for
    a server-prepared statement, or a psycopg RawCursor that skips the conversion."""
    if "%%" in statement:
        raise ValueError("a literal % is not supported here")
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in names:
            names.append(key)
        return f"${names.index(key) + 1}"

    return _NAMED.sub(number, statement), names


def array_literal(values: Iterable[Any]) -> str:
    """A list of ints, floats, strings and Nones as Postgres array text, for parameters a
    statement casts (`%(ids)s::bigint[]`, `%(results)s::jsonb[]`) or for COPY. psycopg's
    list dumper inspects every element to pick a type: a tenth of the worker's time in
    a drain."""
    parts = []
    for value in values:
        if value is None:
            parts.append("NULL")
        elif type(value) is int or type(value) is float:
            parts.append(repr(value))
        else:
            parts.append('"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "{" + ",".join(parts) + "}"


# Columns a job keeps when it moves between the live and the history table.
MOVED = (
    "id, queue, kind, name, priority, payload, attempt, max_attempts, backoff, errors, "
    "dedup_key, group_key, labels, flow_id, node_key, meta, progress, progress_message, "
    "rescues, run_at, created_at, started_at"
)


# Settles and renewals name their rows by id, and read each row's token and values
# from the batch's arrays at its position (`AT`): no join for a plan to get wrong. A
# generic plan of a join against the arrays, made when the table held few running
# jobs, can walk every running job in a nested loop and unnest the arrays again for
# each, on every lane connection that planned it so, for as long as it lives. (A batch
# never names a job twice.)
def at(alias: str) -> str:
    """The position in the batch's arrays of the row `alias` names."""
    return f"array_position(%(ids)s::bigint[], {alias}.id)"


# The position of row `j` in the batch's arrays.
AT = at("j")


# Only rows this claim still holds: running, with the claim's token. A row rescued,
# cancelled or settled by an earlier try is left alone. The rows are found by id:
# the state is compared with a value the planner cannot see (a subquery's), so that
# it cannot use the partial index of running jobs (qe_job_running_group) instead. A
# generic plan made when few jobs ran walks that whole index, with every entry of
# the jobs run since the last vacuum, for every batch: while a long transaction holds
# vacuum back, a walk of every job run since it began.
RUNNING = "(SELECT 'running'::varchar)"
FENCED = f"""j.id = ANY(%(ids)s::bigint[]) AND j.state = {RUNNING}
       AND j.claim_token = (%(tokens)s::bigint[])[{AT}]"""


# Succeeded: move fenced rows (still running under our token) to history. The two
# halves are shared with sql.SETTLE_SUCCEEDED_FLOW.
SUCCEEDED_DONE = f"""done AS (
    DELETE FROM queue_engine_job j
     WHERE {FENCED}
    RETURNING j.*, (%(results)s::jsonb[])[{AT}] AS d_result
)"""


# The history rows of the jobs in `done`, as succeeded, with their results.
SUCCEEDED_MOVE = f"""
INSERT INTO queue_engine_jobrecord ({MOVED}, state, result, worker, finished_at)
SELECT {MOVED}, 'succeeded', d_result, lease_owner, now() FROM done
RETURNING id"""


# Row `j`'s delay in the batch's array, in seconds.
DELAY = f"(%(delays)s::float8[])[{AT}]"


# A job an operator asked to stop (OPS_REQUEST_CANCEL) does not run again.
CANCEL_NOT_REQUESTED = "NOT j.meta ? 'cancel_requested'"


# Redrive ended jobs back into the live table with fresh attempts. Errors are
# kept for the record. A dedup key already held by a live job (or by an earlier
# job in the same batch) is dropped so the redrive cannot collide.
def back_to_live(rows: str, counter: str) -> str:
    """The columns dedup_key to meta of ended jobs going back to the live table (a
    redrive, a flow's requeue), read from `rows`, which numbers each (kind, dedup key)
    in `nth`: the dedup key only if no live job (nor an earlier row) holds it, and the
    meta without an operator's stop request, with `counter` counted up and, in
    `run_starts`, how many errors the job holds as its new run begins: the job page
    numbers runs by it, since each run counts its attempts from 1 again."""
    return f"""CASE WHEN dedup_key IS NULL OR nth > 1 OR EXISTS (
                SELECT 1 FROM queue_engine_job l WHERE l.kind = {rows}.kind
                   AND l.dedup_key = {rows}.dedup_key) THEN NULL ELSE dedup_key END,
       group_key, labels, flow_id, node_key,
       (meta - 'cancel_requested')
           || jsonb_build_object('{counter}', COALESCE((meta->>'{counter}')::int, 0) + 1,
                                 'run_starts', COALESCE(meta->'run_starts', '[]'::jsonb)
                                     || to_jsonb(jsonb_array_length(errors)))"""


# The database clock: every time the engine compares comes from it, not from a host's.
DATABASE_NOW = "SELECT now()"


# The instant every metric bucket and series point is aligned to (date_bin's origin).
BUCKET_ORIGIN = "TIMESTAMPTZ '2000-01-01 00:00:00+00'"

# The history rows the metrics count: every ended job but the nodes a rerun from a node
# reused (sql.REUSE_NODES), which go to the history as succeeded without starting and
# did not run. Reads history rows' columns.
NOT_REUSED = "(started_at IS NOT NULL OR state <> 'succeeded')"

# A finished job's wait (from run_at to the start of its last attempt) and run (from
# that start to its finish), in seconds; both NULL for a job that never started
# (GREATEST alone would turn NULL into 0). Reads history rows' columns. date_part, not
# EXTRACT: EXTRACT of an interval is a numeric, whose arithmetic costs several times a
# float's over a minute's million rows.
WAIT_AND_RUN = """CASE WHEN started_at IS NOT NULL
                THEN GREATEST(date_part('epoch', started_at - run_at), 0)
           END AS wait,
           CASE WHEN started_at IS NOT NULL
                THEN GREATEST(date_part('epoch', finished_at - started_at), 0)
           END AS run"""

# A minute bucket's counts and sums from its history rows (state, attempt, and
# WAIT_AND_RUN's wait and run): succeeded, failed, cancelled, retried, timed, wait_sum
# and run_sum, in the metric bucket's column order.
MINUTE_COUNTS = """count(*) FILTER (WHERE state = 'succeeded'),
       count(*) FILTER (WHERE state = 'failed'),
       count(*) FILTER (WHERE state = 'cancelled'),
       COALESCE(sum(GREATEST(attempt - 1, 0)), 0),
       count(wait),
       COALESCE(sum(wait), 0), COALESCE(sum(run), 0)"""

# The wait and run percentiles of a group of rows with WAIT_AND_RUN's columns.
MINUTE_PERCENTILES = """percentile_cont(0.5) WITHIN GROUP (ORDER BY wait),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY wait),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY run),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY run)"""

# Both, in the metric bucket's column order.
MINUTE_FIGURES = f"""{MINUTE_COUNTS},
       {MINUTE_PERCENTILES}"""


# The worker's unpaused queues (every queue, or those it serves), with their limits named
# once: `grouped` (group caps, or rate budgets per key) and `capped` (any limit its
# claimers take turns for). Read by the claim (sql/claim.py) and by COUNT_DOWN_CLAIM
# (sql/fan_out.py).
CLAIM_CONFIGS = """configs AS (
    SELECT c.*, k.grouped,
           (c.max_concurrency IS NOT NULL OR c.rate_limit IS NOT NULL OR k.grouped) AS capped
      FROM queue_engine_queueconfig c
     CROSS JOIN LATERAL (
           SELECT c.group_concurrency IS NOT NULL OR c.rate_limit_per_key OR EXISTS (
                      SELECT 1 FROM queue_engine_grouplimit g WHERE g.queue = c.name)
                  AS grouped) k
     WHERE NOT c.paused AND (%(all_queues)s OR c.name = ANY(%(queues)s::varchar[]))
)"""


# A flow node's parents' outputs by node key, as JSON text (NULL for a node outside a
# flow, or without parents): those handed down onto its row as its parents counted it
# down (Job.parent_outputs, sql/flows.py), which are all of them or none. Else from the
# history, a parent at a time: driven from the node's edges, then one history row per
# parent by key, which reads every leaf of the partitioned history. Planned while the
# history held a single row, that look-up once chose an index on (kind, id) and read
# all of it for every parent: the lanes now plan their statements again after a while
# (worker/script.py, REPLAN_FIRST), when the statistics have caught up.
OUTPUTS = """CASE WHEN j.flow_id IS NOT NULL THEN COALESCE(j.parent_outputs::text, (
                  SELECT jsonb_object_agg(r.node_key, r.result)::text
                    FROM queue_engine_flowedge e
                   CROSS JOIN LATERAL (
                         SELECT h.node_key, h.result FROM queue_engine_jobrecord h
                          WHERE h.id = e.parent_id AND h.state = 'succeeded' LIMIT 1) r
                   WHERE e.child_id = j.id)) END"""
