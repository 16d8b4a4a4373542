"""Putting jobs into the queue: one row, one row with a dedup key, a debounce, many rows."""

from queue_engine.sql.fragments import numbered

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
# takes its default (available now). Four parameters rather than thirteen: with one
# job per statement, binding and planning the rest costs more than the insert.
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


# The live job holding a kind's dedup key, if any (the key is unique among live jobs).
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


# The columns a bulk enqueue writes, in COPY_JOBS' and INSERT_JOBS_UNNEST's order.
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


# The live holders of these (kind, dedup key) pairs: a bulk enqueue returns their ids
# for the items whose keys were taken.
SELECT_JOB_IDS_BY_DEDUP_KEYS = """
    SELECT j.kind, j.dedup_key, j.id
      FROM queue_engine_job j
      JOIN unnest(%s::varchar[], %s::varchar[]) AS k(kind, dedup_key)
        ON j.kind = k.kind AND j.dedup_key = k.dedup_key
"""
