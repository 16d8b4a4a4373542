"""Durable steps (`ctx.step`): what a job's attempts read and record."""

# Forget these jobs' steps, so that their next attempt runs every step again (an
# operator's redrive or requeue that asks for it, or the jobs' removal).
CLEAR_STEPS = """
WITH cleared AS (
    DELETE FROM queue_engine_jobstep WHERE job_id = ANY(%(ids)s::bigint[])
)
UPDATE queue_engine_job SET meta = meta - 'has_steps'
 WHERE id = ANY(%(ids)s::bigint[]) AND meta ? 'has_steps'
"""


# Record a batch of finished steps (of one handler, or of many: worker/steps.py,
# StepWriter), and say for each whether its worker still holds its job. A step is
# recorded either way: its effects happened, and the attempt that holds the job now (or
# the next one) must not run it again. The first record of a name wins.
RECORD_STEPS = """
WITH input AS (
    SELECT * FROM unnest(%(jobs)s::bigint[], %(names)s::varchar[], %(attempts)s::int[],
                         %(results)s::text[], %(started)s::timestamptz[], %(tokens)s::bigint[])
           WITH ORDINALITY AS t(job_id, name, attempt, result, started_at, token, nth)
), recorded AS (
    INSERT INTO queue_engine_jobstep (job_id, name, attempt, result, started_at)
    SELECT job_id, name, attempt, result::jsonb, started_at FROM input
    ON CONFLICT (job_id, name) DO NOTHING
), marked AS (
    -- The claim reads a job's steps only when its meta says it has some (HAS_STEPS).
    UPDATE queue_engine_job j SET meta = j.meta || '{"has_steps": true}'
     WHERE j.id = ANY(%(jobs)s::bigint[]) AND NOT j.meta ? 'has_steps'
)
SELECT i.job_id, EXISTS (SELECT 1 FROM queue_engine_job j
                          WHERE j.id = i.job_id AND j.claim_token = i.token
                            AND j.state = 'running')
  FROM input i
 ORDER BY i.nth
"""


# A removed job's log lines, steps and unconsumed signals go with it
# (`ops.remove_jobs`), as retention's do.
FORGET_REMOVED = """
WITH logs AS (
    DELETE FROM queue_engine_joblog WHERE job_id = ANY(%(ids)s::bigint[])
), mail AS (
    DELETE FROM queue_engine_jobsignal WHERE job_id = ANY(%(ids)s::bigint[])
)
DELETE FROM queue_engine_jobstep WHERE job_id = ANY(%(ids)s::bigint[])
"""
