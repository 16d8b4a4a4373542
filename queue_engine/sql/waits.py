"""Waits: signals sent to jobs, and jobs parked until a signal or a time comes.

A parked job stays in the live table with state 'parked', which the claim index leaves
out; `meta.parked` says what it waits for ({"signal", "step", "since", "until"}), and
run_at when it times out (PARKED_FOREVER when it never does), so only the promoter's
index of parked jobs (qe_job_parked) ever reads it, and only once its time has come.
"""

from queue_engine.sql.fragments import AT, CANCEL_NOT_REQUESTED, FENCED
from queue_engine.sql.leader import promote
from queue_engine.sql.notify import wake_per_queue

# The run_at of a job parked without a deadline: far past any promoter's now(), and a
# date Python can still read (infinity is not).
PARKED_FOREVER = "TIMESTAMPTZ '9999-12-31 00:00:00+00'"


# A job's mailbox lock, held to the end of the transaction that takes it: a sender's
# (LOCK_MAILBOX, before SEND_SIGNAL) or a settle's parking the job (LOCK_MAILBOXES,
# before SETTLE_PARKED). One waits for the other's commit, so either the settle's
# WAKE_MAILED sees the signal, or the sender's SEND_SIGNAL, a statement begun after the
# settle's commit, sees the job parked: a signal never misses the park. An advisory
# lock rather than the job's row lock: a sender's open transaction must not hold up
# the heartbeats, progress and steps that write the rows of running jobs.
_MAILBOX_KEY = "hashtextextended('queue_engine.mailbox', {})"
LOCK_MAILBOX = f"SELECT pg_advisory_xact_lock({_MAILBOX_KEY.format('%(job)s')})"
LOCK_MAILBOXES = f"""
SELECT pg_advisory_xact_lock({_MAILBOX_KEY.format("id")})
  FROM unnest(%(ids)s::bigint[]) AS id ORDER BY id
"""


# Send a signal (after LOCK_MAILBOX, in the same transaction): a mailbox row, written
# only if the job is live, and, when the job is parked waiting for this name, the job
# made available (and workers woken) at commit.
SEND_SIGNAL = f"""
WITH target AS (
    SELECT j.id FROM queue_engine_job j WHERE j.id = %(job)s
), woken AS (
    UPDATE queue_engine_job j SET state = 'available', run_at = now()
     WHERE j.id = %(job)s AND j.state = 'parked' AND j.meta->'parked'->>'signal' = %(name)s
    RETURNING j.id, j.queue, j.labels, j.priority, j.run_at
), sent AS (
    INSERT INTO queue_engine_jobsignal (job_id, name, payload)
    SELECT id, %(name)s, %(payload)s::jsonb FROM target
    RETURNING id
), notified AS ({wake_per_queue("woken")}
)
SELECT s.id, (SELECT count(*) FROM notified) FROM sent s
"""


# Consume the oldest signal of this name sent to a job this attempt still holds, and
# record its payload as the wait's durable step, in one transaction: a later attempt
# reads the step and never consumes a second signal for the same wait. The job row is
# locked first, so that no rescue or cancel moves it meanwhile. Returns whether the job
# is held, whether a signal was taken, and its payload as JSON text (the same on a
# Django cursor and a plain psycopg one).
CONSUME_SIGNAL = """
WITH held AS (
    SELECT j.id FROM queue_engine_job j
     WHERE j.id = %(job)s AND j.claim_token = %(token)s AND j.state = 'running'
       FOR NO KEY UPDATE
), taken AS (
    DELETE FROM queue_engine_jobsignal s
     WHERE s.id = (SELECT m.id FROM queue_engine_jobsignal m
                    WHERE m.job_id = (SELECT id FROM held) AND m.name = %(name)s
                    ORDER BY m.id LIMIT 1)
    RETURNING s.job_id, s.payload
), recorded AS (
    INSERT INTO queue_engine_jobstep (job_id, name, attempt, result, started_at)
    SELECT job_id, %(step)s, %(attempt)s, jsonb_build_object('payload', payload), now()
      FROM taken
), marked AS (
    UPDATE queue_engine_job j SET meta = j.meta || '{"has_steps": true}'
      FROM taken WHERE j.id = taken.job_id AND NOT j.meta ? 'has_steps'
)
SELECT EXISTS (SELECT 1 FROM held), (SELECT count(*) FROM taken) > 0,
       (SELECT payload::text FROM taken)
"""


# Park jobs whose handler waits: out of the claim's sight until a signal, their
# deadline or an operator wakes them, the attempt not counted (as a snooze).
SETTLE_PARKED = f"""
UPDATE queue_engine_job j
   SET state = 'parked',
       run_at = COALESCE((%(untils)s::timestamptz[])[{AT}], {PARKED_FOREVER}),
       attempt = j.attempt - 1,
       meta = (j.meta - 'parked') || jsonb_build_object('parked', (%(waits)s::jsonb[])[{AT}]),
       lease_owner = NULL, claim_token = NULL, lease_expires_at = NULL
 WHERE {FENCED} AND {CANCEL_NOT_REQUESTED}
RETURNING j.id
"""


# Right after SETTLE_PARKED, in its transaction, as a statement of its own (so with a
# snapshot that sees every signal committed before it, LOCK_MAILBOXES having waited for
# those in flight): the jobs just parked whose signal waits in the mailbox already
# (sent while they ran) are available again.
WAKE_MAILED = f"""
WITH woken AS (
    UPDATE queue_engine_job j SET state = 'available', run_at = now()
     WHERE j.id = ANY(%(ids)s::bigint[]) AND j.state = 'parked'
       AND EXISTS (SELECT 1 FROM queue_engine_jobsignal s
                    WHERE s.job_id = j.id AND s.name = j.meta->'parked'->>'signal')
    RETURNING j.id, j.queue, j.labels, j.priority, j.run_at
), notified AS ({wake_per_queue("woken")}
)
SELECT w.id, (SELECT count(*) FROM notified) FROM woken w
"""


# Parked jobs whose deadline has come become available, marked due: their wait returns
# (a sleep) or times out (a signal) when the handler reaches it again.
PROMOTE_PARKED = promote("parked", ", meta = jsonb_set(j.meta, '{parked,due}', 'true')")


# An operator ends parked jobs' waits now: a sleep returns, a signal's wait times out.
OPS_WAKE_NOW = """
UPDATE queue_engine_job j
   SET state = 'available', run_at = now(),
       meta = jsonb_set(j.meta, '{parked,woken}',
                        jsonb_build_object('by', %(actor)s::text, 'at', now()))
 WHERE j.id = ANY(%(ids)s::bigint[]) AND j.state = 'parked'
RETURNING j.id, j.queue
"""


# Jobs waiting for a time get another (ops.reschedule_jobs): a parked job's deadline
# moves (meta.parked.until, which its wait reads again when it resumes) and a scheduled
# job's run_at. A time that has come makes them available now, a parked one marked due:
# its sleep returns, its wait for a signal times out. Jobs in other states are left. The
# time is compared with the statement's, not the transaction's: called inside a long
# transaction of the application, a time just past must still count as come.
OPS_RESCHEDULE = """
WITH moved AS (
    UPDATE queue_engine_job j
       SET run_at = %(when)s::timestamptz,
           state = CASE WHEN %(when)s::timestamptz <= statement_timestamp() THEN 'available' ELSE j.state END,
           meta = CASE WHEN j.state = 'parked' THEN jsonb_set(
                           jsonb_set(j.meta, '{parked,until}', to_jsonb(%(when)s::timestamptz)),
                           '{parked,due}', to_jsonb(%(when)s::timestamptz <= statement_timestamp()))
                       ELSE j.meta END
     WHERE j.id = ANY(%(ids)s::bigint[]) AND j.state IN ('parked', 'scheduled')
    RETURNING j.id, j.queue, j.state
)
SELECT id, queue, state FROM moved ORDER BY id
"""
