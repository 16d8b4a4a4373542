"""Every hot-path SQL statement, each named, with what it guarantees.

Parameters are always bound. Table names are fixed by the models' db_table.
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


# --- enqueue -----------------------------------------------------------------

_INSERT_COLUMNS = """
    (queue, kind, name, priority, payload, max_attempts, backoff, dedup_key, group_key,
     labels, meta, run_at, state)
"""
_INSERT_VALUES = """
    VALUES (%(queue)s, %(kind)s, %(name)s, %(priority)s, %(payload)s::jsonb, %(max_attempts)s,
            %(backoff)s::jsonb, %(dedup_key)s, %(group_key)s, %(labels)s::varchar[],
            %(meta)s::jsonb,
            COALESCE(%(run_at)s::timestamptz,
                     statement_timestamp() + make_interval(secs => %(delay)s)),
            CASE WHEN COALESCE(%(run_at)s::timestamptz,
                               statement_timestamp() + make_interval(secs => %(delay)s))
                      > statement_timestamp() THEN 'scheduled' ELSE 'available' END)
"""

# One job. Runnable-now jobs are announced by the statement trigger at commit.
INSERT_JOB = (
    "INSERT INTO queue_engine_job"
    + _INSERT_COLUMNS
    + _INSERT_VALUES
    + "RETURNING id, state, run_at, created_at, (xmax::text <> '0') AS coalesced"
)

# A job with nothing but its queue, kind, payload and attempts: every other column
# takes its default (available now). Four parameters instead of thirteen: on one job
# per statement, 310 us against 232 on this machine, the baseline's INSERT 212.
INSERT_PLAIN_JOB = """
INSERT INTO queue_engine_job (queue, kind, payload, max_attempts)
VALUES ($1, $2, $3::jsonb, $4)
RETURNING id, created_at
"""

# INSERT_JOB for a RawCursor: $n placeholders, parameters in INSERT_JOB_PARAMS order.
INSERT_JOB_NUMBERED, INSERT_JOB_PARAMS = numbered(INSERT_JOB)

# One job unless a live job of the same kind holds the dedup key (then nothing).
INSERT_JOB_DEDUP = (
    "INSERT INTO queue_engine_job"
    + _INSERT_COLUMNS
    + _INSERT_VALUES
    + """ON CONFLICT (kind, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING id, state, run_at, created_at, (xmax::text <> '0') AS coalesced"""
)

# Debounce: a pending job with the key takes the latest payload and run time.
# A running (or blocked) holder is left alone and nothing is returned.
UPSERT_JOB_DEBOUNCED = (
    "INSERT INTO queue_engine_job"
    + _INSERT_COLUMNS
    + _INSERT_VALUES
    + """ON CONFLICT (kind, dedup_key) WHERE dedup_key IS NOT NULL DO UPDATE
       SET payload = EXCLUDED.payload, run_at = EXCLUDED.run_at, state = EXCLUDED.state,
           name = EXCLUDED.name, priority = EXCLUDED.priority, queue = EXCLUDED.queue,
           group_key = EXCLUDED.group_key, meta = queue_engine_job.meta || EXCLUDED.meta
                || jsonb_build_object('debounced',
                       COALESCE((queue_engine_job.meta->>'debounced')::int, 0) + 1)
     WHERE queue_engine_job.state IN ('available', 'scheduled')
    RETURNING id, state, run_at, created_at, (xmax::text <> '0') AS coalesced"""
)

# Debounce behind a running holder: the holder gives its key up to the new job.
RELEASE_RUNNING_DEDUP_KEY = """
    UPDATE queue_engine_job
       SET dedup_key = NULL, meta = meta || jsonb_build_object('released_dedup_key', dedup_key)
     WHERE kind = %s AND dedup_key = %s AND state = 'running'
"""

# A wake-up for workers of one queue (sent at commit).
NOTIFY_WAKE = "SELECT pg_notify('qe_wake', %s)"

SELECT_JOB_ID_BY_DEDUP_KEY = """
    SELECT id FROM queue_engine_job WHERE kind = %s AND dedup_key = %s
"""

# Ids for a bulk enqueue, drawn in input order, and the database clock.
# The sequence is looked up once, in a scalar subquery: called in the select list,
# pg_get_serial_sequence (a stable function) runs once a row, 10 times the nextval.
# The clock is the statement's, not the transaction's (now()): an enqueue's delay
# counts from the call, however long ago the caller's transaction began (and so does
# a single enqueue's, above, and the columns' defaults, Django's Now()).
ALLOCATE_JOB_IDS = """
    SELECT statement_timestamp(),
           array(SELECT nextval((SELECT pg_get_serial_sequence('queue_engine_job', 'id'))::regclass)
                   FROM generate_series(1, %s))
"""

BULK_COLUMNS = (
    "id, queue, kind, name, priority, payload, max_attempts, backoff, dedup_key, group_key, "
    "labels, meta, run_at, state"
)

# Bulk enqueue without dedup keys: COPY, the fastest path into Postgres. The columns
# each job decides come first; those its kind and options decide, after (see _copy_text).
COPY_JOBS = """
    COPY queue_engine_job (id, name, payload, group_key, meta, queue, kind, priority,
                           max_attempts, backoff, dedup_key, labels, run_at, state)
    FROM STDIN
"""

# Bulk enqueue with dedup keys: rows whose key is held are skipped (see RETURNING).
INSERT_JOBS_UNNEST = f"""
    INSERT INTO queue_engine_job ({BULK_COLUMNS})
    SELECT id, queue, kind, name, priority, payload, max_attempts, backoff, dedup_key,
           group_key, labels::varchar[], meta, run_at, state
      FROM unnest(%s::bigint[], %s::varchar[], %s::varchar[], %s::varchar[], %s::smallint[],
                  %s::jsonb[], %s::int[], %s::jsonb[], %s::varchar[], %s::varchar[],
                  %s::text[], %s::jsonb[], %s::timestamptz[], %s::varchar[])
           AS t(id, queue, kind, name, priority, payload, max_attempts, backoff, dedup_key,
                group_key, labels, meta, run_at, state)
    ON CONFLICT (kind, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING id
"""

SELECT_JOB_IDS_BY_DEDUP_KEYS = """
    SELECT j.kind, j.dedup_key, j.id
      FROM queue_engine_job j
      JOIN unnest(%s::varchar[], %s::varchar[]) AS k(kind, dedup_key)
        ON j.kind = k.kind AND j.dedup_key = k.dedup_key
"""


# --- claim and settle (the worker's hot path) ---------------------------------

# Columns a job keeps when it moves between the live and the history table.
MOVED = (
    "id, queue, kind, name, priority, payload, attempt, max_attempts, backoff, errors, "
    "dedup_key, group_key, labels, flow_id, node_key, meta, progress, progress_message, "
    "rescues, run_at, created_at, started_at"
)

# For the rest of the claim's transaction (the claim comes last), on top of the lane
# connection's own settings (worker/lanes.py LANE_SETTINGS: one generic plan, no
# sequential scans): no bitmap scans. With statistics taken while a queue held few
# available jobs (a fan-out's children still blocked, say) the planner reads the whole
# claim index into a bitmap and sorts it, every claim, instead of walking it in order
# to the LIMIT. 100 of 10,000 released children: 6.5 ms with the bitmap, under 4
# without.
CLAIM_SETTINGS = ("SET LOCAL enable_bitmapscan = off",)

# Claim up to %(limit)s runnable jobs from unpaused queues, best first (priority,
# then run time, then id), and lease them for the queue's lock duration.
# - Each queue is read through the claim index; SKIP LOCKED lets claimers take
#   disjoint rows without waiting.
# - A limited queue (one with a cap, a rate limit or group caps): its room under its
#   cap and its rate limit is guessed first without a lock, to bound how many
#   candidates are read and row-locked. Then, with the candidates read and ranked,
#   queue_engine_limited_rooms() (migration 0020, in `rooms`) takes the queue's
#   advisory lock and counts its running jobs once, by group key, with a fresh
#   snapshot: that count gives the queue's room (a row with no key) and its keys'
#   rooms. Claimers of a limited queue take turns only for that count, the pick and
#   the UPDATE, and each counts the others' committed claims. (Group keys used to be
#   try-locked one by one when the queue had no cap: two claimers ranking the same
#   head of the queue then left the second with no room on any key, and a queue with
#   group caps alone drained at 0.46 to 0.48 of a plain one, against 0.79 to 0.86
#   taking turns.)
# - Keys already at their cap (counted without a lock, in q.full_keys) are passed over
#   when candidates are read: a busy key's backlog would otherwise fill every claim's
#   candidates and starve the other keys. Their waiting jobs are still walked in the
#   claim index, so a backlog of millions on one capped key makes claims of its queue
#   slower, never stuck.
# - The labels test is written so the planner sees that most jobs require none.
# - Suspects (jobs rescued at least twice) are claimed only by a
#   claim `alone`, which a worker sends with a limit of 1 when nothing else of its
#   runs or is being claimed, and after which it claims nothing until the suspect has
#   ended; any other claim passes over them and reports their queues (`suspects`).
CLAIM = """
WITH configs AS (
    SELECT c.* FROM queue_engine_queueconfig c
     WHERE NOT c.paused AND (%(all_queues)s OR c.name = ANY(%(queues)s::varchar[]))
), q AS (
    SELECT c.name, c.lock_duration, c.group_concurrency, c.rate_limit, c.max_concurrency,
           c.rate_window, k.grouped,
           -- Keys already at their cap, by a count without a lock: their waiting jobs
           -- are passed over when candidates are read, so that a busy key with a
           -- backlog never fills the candidates and starves the other keys. (The
           -- count under the lock, in rooms, still decides; a key that frees room
           -- meanwhile is read again by the next claim.)
           CASE WHEN k.grouped THEN (
               SELECT array_agg(f.group_key) FROM (
                   SELECT r.group_key
                     FROM (SELECT r.group_key, count(*) AS running
                             FROM queue_engine_job r
                            WHERE r.state = 'running' AND r.queue = c.name
                              AND r.group_key IS NOT NULL
                            GROUP BY r.group_key) r
                     LEFT JOIN queue_engine_grouplimit g
                       ON g.queue = c.name AND g.group_key = r.group_key
                    WHERE r.running >= COALESCE(g.max_concurrency, c.group_concurrency)
                   UNION  -- keys held at 0, which run nothing
                   SELECT g.group_key FROM queue_engine_grouplimit g
                    WHERE g.queue = c.name AND g.max_concurrency = 0) f)
           END AS full_keys,
           (c.max_concurrency IS NOT NULL OR c.rate_limit IS NOT NULL OR k.grouped) AS limited,
           -- Without the queue's lock: how many candidates are worth reading and locking.
           GREATEST(LEAST(
               %(limit)s,
               CASE WHEN c.max_concurrency IS NOT NULL THEN c.max_concurrency - (
                   SELECT count(*) FROM queue_engine_job r
                    WHERE r.state = 'running' AND r.queue = c.name) END,
               CASE WHEN c.rate_limit IS NOT NULL THEN c.rate_limit - (
                   SELECT COALESCE(sum(l.count), 0) FROM queue_engine_claimlog l
                    WHERE l.queue = c.name
                      AND l.at > now() - make_interval(secs => c.rate_window)) END
           ), 0) AS room_guess
      FROM configs c
     CROSS JOIN LATERAL (
           SELECT c.group_concurrency IS NOT NULL OR EXISTS (
                      SELECT 1 FROM queue_engine_grouplimit g WHERE g.queue = c.name)
                  AS grouped) k
), candidates AS (
    SELECT j.*, q.lock_duration, q.group_concurrency, q.grouped, q.limited, q.room_guess
      FROM q CROSS JOIN LATERAL (
            SELECT id, queue, group_key, priority, run_at
              FROM queue_engine_job
             WHERE state = 'available' AND queue = q.name AND run_at <= now()
               AND (labels = '{}' OR labels <@ %(labels)s::varchar[])
               -- Suspects only in a claim alone (see above), which takes nothing else.
               AND (rescues >= 2) = %(alone)s
               AND (q.full_keys IS NULL OR group_key IS NULL
                    OR group_key <> ALL(q.full_keys))
             ORDER BY priority DESC, run_at, id
             -- Only the room: every extra row is locked and ranked while the queue's
             -- claimers wait. A key with less room than jobs among them leaves the
             -- claim short, and the worker claims again in 10 ms (`held`), passing
             -- over the keys this one filled.
             LIMIT q.room_guess
               FOR UPDATE SKIP LOCKED
           ) j
     WHERE q.room_guess > 0
), ranked AS (
    SELECT c.*,
           row_number() OVER (PARTITION BY c.queue, c.group_key
                              ORDER BY c.priority DESC, c.run_at, c.id) AS nth_in_group
      FROM candidates c
), keys AS (
    SELECT (SELECT array_agg(DISTINCT c.queue) FROM candidates c WHERE c.limited) AS locked,
           COALESCE(array_agg(queue), '{}') AS queues,
           COALESCE(array_agg(group_key), '{}') AS keys,
           COALESCE(array_agg(group_concurrency), '{}') AS defaults
      FROM (SELECT DISTINCT queue, group_key, group_concurrency FROM candidates
             WHERE grouped AND group_key IS NOT NULL) d
), rooms AS (
    -- The limited queues' rooms (a row with no key) and their keys': taken only now,
    -- with the candidates read and ranked, so that claimers of a limited queue wait for
    -- each other only for the count, the pick and the UPDATE.
    SELECT g.* FROM keys k
     CROSS JOIN LATERAL queue_engine_limited_rooms(k.locked, %(limit)s::int, k.queues, k.keys,
                                                   k.defaults) g
     WHERE k.locked IS NOT NULL
), eligible AS (
    SELECT r.*,
           row_number() OVER (PARTITION BY r.queue
                              ORDER BY r.priority DESC, r.run_at, r.id) AS nth_in_queue
      FROM ranked r
      LEFT JOIN rooms g ON g.queue = r.queue AND g.group_key = r.group_key
     WHERE NOT r.grouped OR r.group_key IS NULL OR r.nth_in_group <= g.room
), picked AS (
    SELECT e.id FROM eligible e
      LEFT JOIN rooms l ON l.queue = e.queue AND l.group_key IS NULL
     WHERE e.nth_in_queue <= COALESCE(l.room, e.room_guess)
     ORDER BY e.priority DESC, e.run_at, e.id
     LIMIT %(limit)s
), claimed AS (
    -- started_at is clock_timestamp(), not now(): this claim may share a transaction
    -- with a settle that began before a parent's settle committed, and a flow child
    -- must never look as if it started before its parent finished.
    UPDATE queue_engine_job j
       SET state = 'running', attempt = j.attempt + 1, lease_owner = %(worker)s,
           claim_token = %(token)s, started_at = clock_timestamp(), heartbeat_at = now(),
           lease_expires_at = now() + make_interval(secs => q.lock_duration),
           progress = NULL, progress_message = ''
      FROM q
     -- An array, not a join with picked: a generic plan cannot know how many rows
     -- picked holds, guesses thousands, and hashes the whole job table to join them.
     WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND q.name = j.queue
    RETURNING j.id, j.kind, j.queue, j.payload, j.attempt, j.max_attempts, j.backoff::text,
              j.flow_id, j.node_key, j.meta::text,
              CASE WHEN j.flow_id IS NOT NULL THEN (
                  -- Driven from the child's edges, then one history row per parent by
                  -- key. Planned while the history held a single row, the lookup once
                  -- chose an index on (kind, id) and read all of it for every parent:
                  -- the lanes now plan their statements again after a while
                  -- (worker/script.py, REPLAN_FIRST), when the statistics have caught up.
                  SELECT jsonb_object_agg(r.node_key, r.result)::text
                    FROM queue_engine_flowedge e
                   CROSS JOIN LATERAL (
                         SELECT h.node_key, h.result FROM queue_engine_jobrecord h
                          WHERE h.id = e.parent_id AND h.state = 'succeeded' LIMIT 1) r
                   WHERE e.child_id = j.id
              ) END AS outputs,
              q.lock_duration
), logged AS (
    -- Starts are counted per span of a 600th of the rate window (at least 0.1 s), each
    -- row stamped with its span's end: a window's sum reads at most about 600 rows
    -- however many claims fell in it (with a row per claim, 280 claims a second and a
    -- 60 s window made each sum read 16,800 rows, 3 ms, twice a claim). A span reaching
    -- into the window counts whole: the limit errs by at most one span, towards fewer
    -- starts.
    INSERT INTO queue_engine_claimlog AS l (queue, at, count)
    SELECT claimed.queue,
           to_timestamp(((floor(extract(epoch FROM now()) / s.span) + 1) * s.span)::float8),
           count(*)
      FROM claimed JOIN q ON q.name = claimed.queue
     CROSS JOIN LATERAL (SELECT GREATEST(q.rate_window / 600.0, 0.1) AS span) s
     WHERE q.rate_limit IS NOT NULL
     GROUP BY claimed.queue, s.span
        ON CONFLICT (queue, at) DO UPDATE SET count = l.count + EXCLUDED.count
), held AS (
    -- Queues this claim read candidates of and left some (a cap, a busy key's room, the
    -- rate limit) while it took fewer jobs than it wanted. The worker claims again soon
    -- (worker/lanes.py, HELD_BACK_FIRST) instead of at its next poll: the next claim
    -- passes over the keys this one filled. Counted from what the claim already holds:
    -- a look into the queue for more work, under the queue's lock, cost every claim of
    -- drain_with_limits 10 ms.
    SELECT c.queue FROM candidates c
     WHERE (SELECT count(*) FROM picked) < %(limit)s
       AND c.id <> ALL(ARRAY(SELECT id FROM picked))
     GROUP BY c.queue
), limited AS (
    -- Limited queues this claim looked at, full or not: their claimers take turns on
    -- the queue's lock, so the worker sends one claim at a time while it serves them
    -- (worker/lanes.py, Lanes.serial_claims).
    SELECT q.name FROM q WHERE q.limited
), suspects AS (
    -- Queues where a suspect this worker could run is due: the worker then claims
    -- nothing more until its jobs have ended, and claims alone (worker/lanes.py,
    -- Lanes._quarantine). Read through qe_job_suspect, which holds only suspects.
    SELECT q.name FROM q
     WHERE NOT %(alone)s AND EXISTS (
           SELECT 1 FROM queue_engine_job s
            WHERE s.rescues >= 2 AND s.queue = q.name AND s.state = 'available'
              AND s.run_at <= now()
              AND (s.labels = '{}' OR s.labels <@ %(labels)s::varchar[]))
)
SELECT * FROM claimed
 UNION ALL  -- marker rows, no id: one per queue, the queue in its place, the marker as kind
SELECT NULL, 'held', h.queue, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM held h
 UNION ALL
SELECT NULL, 'limited', l.name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM limited l
 UNION ALL
SELECT NULL, 'suspects', s.name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM suspects s
"""

# After a lost connection: the rows a claim with this token took if its commit
# went through unseen, so they run now instead of waiting for their lease.
RECOVER_CLAIM = """
SELECT j.id, j.kind, j.queue, j.payload, j.attempt, j.max_attempts, j.backoff::text,
       j.flow_id, j.node_key, j.meta::text,
       CASE WHEN j.flow_id IS NOT NULL THEN (
           SELECT jsonb_object_agg(r.node_key, r.result)::text
             FROM queue_engine_flowedge e
             JOIN queue_engine_jobrecord r ON r.id = e.parent_id
            WHERE e.child_id = j.id AND r.state = 'succeeded'
       ) END AS outputs,
       extract(epoch FROM j.lease_expires_at - j.heartbeat_at)::int AS lock_duration
  FROM queue_engine_job j
 WHERE j.state = 'running' AND j.claim_token = %(token)s AND j.lease_owner = %(worker)s
"""

PRUNE_CLAIM_LOG = """
DELETE FROM queue_engine_claimlog l
 WHERE l.at < now() - make_interval(secs => COALESCE(
           (SELECT c.rate_window FROM queue_engine_queueconfig c WHERE c.name = l.queue), 0))
"""


# Settles and renewals name their rows by id, and read each row's token and values
# from the batch's arrays at its position (`AT`): no join for a plan to get wrong. A
# generic plan of the join it replaced, made when the table held few running jobs,
# walked every running job in a nested loop and unnested the arrays again for each:
# 16 ms for a settle of 100 (128 ms for a fan-out's root), on the lane connections
# that happened to plan it that way, for as long as they lived. (A batch never names a
# job twice.)
def at(alias: str) -> str:
    """The position in the batch's arrays of the row `alias` names."""
    return f"array_position(%(ids)s::bigint[], {alias}.id)"


AT = at("j")
FENCED = f"""j.id = ANY(%(ids)s::bigint[]) AND j.state = 'running'
       AND j.claim_token = (%(tokens)s::bigint[])[{AT}]"""

# Succeeded: move fenced rows (still running under our token) to history. The two
# halves are shared with sql_flows.SETTLE_SUCCEEDED_FLOW.
SUCCEEDED_DONE = f"""done AS (
    DELETE FROM queue_engine_job j
     WHERE {FENCED}
    RETURNING j.*, (%(results)s::jsonb[])[{AT}] AS d_result
)"""
SUCCEEDED_MOVE = f"""
INSERT INTO queue_engine_jobrecord ({MOVED}, state, result, worker, finished_at)
SELECT {MOVED}, 'succeeded', d_result, lease_owner, now() FROM done
RETURNING id"""
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

DELAY = f"(%(delays)s::float8[])[{AT}]"

# A job an operator asked to stop (OPS_REQUEST_CANCEL) does not run again.
CANCEL_NOT_REQUESTED = "NOT j.meta ? 'cancel_requested'"

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

# Retry later: back to scheduled (or available at once) with the error kept.
SETTLE_RETRY = f"""
UPDATE queue_engine_job j
   SET state = CASE WHEN {DELAY} > 0 THEN 'scheduled' ELSE 'available' END,
       run_at = now() + make_interval(secs => {DELAY}),
       errors = j.errors || jsonb_build_array((%(errors)s::jsonb[])[{AT}]),
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
RELEASE = _RELEASE.format(run_at="", fenced=FENCED, not_cancelled=CANCEL_NOT_REQUESTED)
# Give back jobs whose plain-function handler still runs in a process about to exit:
# claimable only `after` seconds from now, when that process (and the thread with it)
# is surely gone, so that no other worker runs the same attempt meanwhile.
RELEASE_RUNNING = _RELEASE.format(
    run_at="\n       run_at = GREATEST(j.run_at, now() + make_interval(secs => %(after)s)),",
    fenced=FENCED,
    not_cancelled=CANCEL_NOT_REQUESTED,
)

# Renew the leases this process holds. The rows in the result are still ours; rows
# missing from it were taken from us (cancelled, rescued or removed) and must stop.
# - A row another transaction holds locked is not waited for (SKIP LOCKED): it keeps
#   its lease until the next beat. Waiting, a beat stalled behind a handler's own
#   transaction (ctx.atomic(), which holds its row to the end) and the worker's other
#   jobs lost their leases and ran again; and a beat that had renewed one row and
#   waited for the next could deadlock with a settle of the same rows walking them in
#   another order (another plan).
# - Whether a row is ours is read from the statement's snapshot, locked or not: a row a
#   settle or a cancel is deleting is still listed, and missing from the next beat.
HEARTBEAT = f"""
WITH free AS (
    SELECT j.id FROM queue_engine_job j
     WHERE {FENCED}
       FOR NO KEY UPDATE SKIP LOCKED
), renewed AS (
    UPDATE queue_engine_job j
       SET lease_expires_at = now() + (j.lease_expires_at - j.heartbeat_at),
           heartbeat_at = now()
     WHERE j.id = ANY(ARRAY(SELECT id FROM free))
)
SELECT j.id, j.meta ? 'cancel_requested' FROM queue_engine_job j WHERE {FENCED}
"""

# Progress reports, the latest per job, fenced like a settle: in the settle itself,
# before its rows move.
PROGRESS = f"""
UPDATE queue_engine_job j
   SET progress = (%(fractions)s::float8[])[{AT}],
       progress_message = (%(messages)s::text[])[{AT}]
 WHERE {FENCED}
"""

# The same between settles (the worker's flusher), without waiting for a locked row
# (HEARTBEAT says why): it returns the rows it wrote, and the worker reports the others
# again with the next flush, or with their settle.
PROGRESS_UNLOCKED = f"""
WITH free AS (
    SELECT j.id FROM queue_engine_job j
     WHERE {FENCED}
       FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE queue_engine_job j
   SET progress = (%(fractions)s::float8[])[{AT}],
       progress_message = (%(messages)s::text[])[{AT}]
 WHERE j.id = ANY(ARRAY(SELECT id FROM free))
RETURNING j.id
"""

# Lock one running job for an in-handler transaction that completes it (ctx.atomic).
LOCK_OWN_JOB = """
SELECT meta ? 'cancel_requested' FROM queue_engine_job
 WHERE id = %s AND claim_token = %s AND state = 'running'
   FOR UPDATE
"""

INSERT_LOGS = """
INSERT INTO queue_engine_joblog (job_id, attempt, seq, stream, level, at, text)
SELECT * FROM unnest(%(job_ids)s::bigint[], %(attempts)s::int[], %(seqs)s::int[],
                     %(streams)s::varchar[], %(levels)s::varchar[], %(ats)s::timestamptz[],
                     %(texts)s::text[])
"""

# Sent at the end of a worker's message, after its claim, in the claim's transaction:
# wake the other workers for the queues its settle made jobs runnable in now (retried
# or snoozed with no delay, released: the queues given; flow children counted down to
# zero: the queues sql_flows.NOTE_RELEASED noted in the session) if its own claim left
# runnable jobs there. Waking them at the settle's commit instead sent every worker's
# lanes after a chain's next node, which the settling lane then claimed itself: a herd
# of empty claims at every step (flow_chain: 5.9 ms a step for the settling message
# alone). One probe of the claim index per queue: finding the released children again
# by their parents' edges cost 60 ms after a fan-out's root, 1 ms per 100 children.
# The note is cleared after it is read (CLEAR_RELEASED).
WAKE_LEFT = """
SELECT pg_notify('qe_wake', x.queue) FROM (
    SELECT DISTINCT q.queue FROM unnest(
        %(queues)s::varchar[]
        || COALESCE(NULLIF(current_setting('qe.released', true), ''), '{}')::varchar[]) AS q(queue)
) x
 WHERE EXISTS (SELECT 1 FROM queue_engine_job j
                WHERE j.state = 'available' AND j.queue = x.queue AND j.run_at <= now())
"""
CLEAR_RELEASED = "SELECT set_config('qe.released', '', false)"

# One wake-up per queue that got runnable jobs, sent at commit.
NOTIFY_QUEUES = """
SELECT pg_notify('qe_wake', q) FROM unnest(%s::varchar[]) AS q
"""

# Hints for the console: which jobs changed or logged (ids only, never rows).
NOTIFY_EVENT = "SELECT pg_notify('qe_events', %s)"
NOTIFY_EVENTS = "SELECT pg_notify('qe_events', e) FROM unnest(%s::text[]) AS e"

# --- worker registry ------------------------------------------------------------

REGISTER_WORKER = """
INSERT INTO queue_engine_workerprocess
       (id, host, pid, queues, labels, concurrency, in_flight, is_leader, started_at, heartbeat_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s::varchar[], %(labels)s::varchar[],
        %(concurrency)s, 0, false, now(), now())
ON CONFLICT (id) DO UPDATE
   SET host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
       labels = EXCLUDED.labels, concurrency = EXCLUDED.concurrency,
       started_at = now(), heartbeat_at = now(), in_flight = 0
"""

WORKER_HEARTBEAT = """
UPDATE queue_engine_workerprocess
   SET heartbeat_at = now(), in_flight = %(in_flight)s, is_leader = %(is_leader)s
 WHERE id = %(id)s
"""

UNREGISTER_WORKER = "DELETE FROM queue_engine_workerprocess WHERE id = %s"

# --- leader services ------------------------------------------------------------

# Scheduled jobs whose time has come become available (at most one poll late).
# One statement (one round trip, atomic on its own): promote and wake each queue once.
PROMOTE_SCHEDULED = """
WITH due AS (
    SELECT id FROM queue_engine_job
     WHERE state = 'scheduled' AND run_at <= now()
     ORDER BY run_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), promoted AS (
    UPDATE queue_engine_job j SET state = 'available'
      FROM due WHERE j.id = due.id
    RETURNING j.queue
), woken AS (
    SELECT pg_notify('qe_wake', queue) FROM (SELECT DISTINCT queue FROM promoted) q
)
-- In the select list, where it must run once for the rows to be returned: referenced
-- through a join on true, Postgres dropped the join and woke no one.
SELECT p.queue, (SELECT count(*) FROM woken) AS woken FROM promoted p
"""

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

SWEEP_STALE_WORKERS = """
DELETE FROM queue_engine_workerprocess
 WHERE heartbeat_at < now() - make_interval(secs => %s)
"""

# The return value of a job that completed inside ctx.atomic(), recorded afterwards.
# Read from the arrays by position, as the settles are (see AT).
RECORD_RESULT = f"""
UPDATE queue_engine_jobrecord r
   SET result = (%(results)s::jsonb[])[{at("r")}]
 WHERE r.id = ANY(%(ids)s::bigint[]) AND r.result IS NULL
"""

LEADER_LOCK_KEY = 7_146_010_351_917_311  # pg_try_advisory_lock key of the leader
TRY_LEADER_LOCK = "SELECT pg_try_advisory_lock(%s)"


# --- operator actions (queue_engine.ops) ------------------------------------------

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


# Redrive ended jobs back into the live table with fresh attempts. Errors are
# kept for the record. A dedup key already held by a live job (or by an earlier
# job in the same batch) is dropped so the redrive cannot collide.
def back_to_live(rows: str, counter: str) -> str:
    """The columns dedup_key to meta of ended jobs going back to the live table (a
    redrive, a flow's requeue), read from `rows`, which numbers each (kind, dedup key)
    in `nth`: the dedup key only if no live job (nor an earlier row) holds it, and the
    meta without an operator's stop request, with `counter` counted up."""
    return f"""CASE WHEN dedup_key IS NULL OR nth > 1 OR EXISTS (
                SELECT 1 FROM queue_engine_job l WHERE l.kind = {rows}.kind
                   AND l.dedup_key = {rows}.dedup_key) THEN NULL ELSE dedup_key END,
       group_key, labels, flow_id, node_key,
       (meta - 'cancel_requested')
           || jsonb_build_object('{counter}', COALESCE((meta->>'{counter}')::int, 0) + 1)"""


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

OPS_REMOVE_LIVE = """
DELETE FROM queue_engine_job WHERE id = ANY(%(ids)s::bigint[]) AND state <> 'running'
RETURNING id, flow_id
"""

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

NOTIFY_CONTROL = "SELECT pg_notify('qe_control', %s)"
