-- After each INSERT statement on the live table: give every queue seen for the first
-- time its configuration row (from the defaults the last worker start or migrate wrote
-- from QUEUE_ENGINE, or the model's defaults when there are none, e.g. right after a
-- flush), and wake workers with one NOTIFY per queue that got runnable jobs.
-- The NOTIFY payload names the queue and how many jobs, never a row's contents.
--
-- One query lists each queue of the statement's rows with whether it has a
-- configuration yet and whether a row is runnable now; the defaults are read and the
-- configuration written only for a queue seen for the first time, so the usual insert
-- costs one query beside the INSERT itself.
CREATE OR REPLACE FUNCTION queue_engine_job_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    d record;
BEGIN
    FOR r IN
        SELECT n.queue, count(*) FILTER (WHERE n.state = 'available') AS runnable,
               min(n.id) FILTER (WHERE n.state = 'available') AS first,
               max(n.priority) FILTER (WHERE n.state = 'available') AS priority,
               min(n.run_at) FILTER (WHERE n.state = 'available') AS run_at,
               bool_or(n.labels <> '{}') FILTER (WHERE n.state = 'available') AS labelled,
               NOT EXISTS (SELECT 1 FROM queue_engine_queueconfig c
                            WHERE c.name = n.queue) AS unknown
          FROM new_rows n
         GROUP BY n.queue
    LOOP
        IF r.unknown THEN
            SELECT * INTO d FROM queue_engine_queuedefaults WHERE id = 1;
            IF FOUND THEN
                INSERT INTO queue_engine_queueconfig
                       (name, paused, max_concurrency, rate_limit, rate_window, lock_duration,
                        group_concurrency, retain_succeeded, retain_failed, retain_cancelled,
                        rate_limit_per_key, fair_share)
                VALUES (r.queue, d.paused, d.max_concurrency, d.rate_limit, d.rate_window,
                        d.lock_duration, d.group_concurrency, d.retain_succeeded,
                        d.retain_failed, d.retain_cancelled, d.rate_limit_per_key, d.fair_share)
                ON CONFLICT (name) DO NOTHING;
            ELSE
                INSERT INTO queue_engine_queueconfig (name) VALUES (r.queue)
                ON CONFLICT (name) DO NOTHING;
            END IF;
        END IF;
        IF r.runnable > 0 THEN
            -- "<ticket> <count> <hops> <priority> <run_at> <queue>" (worker/roster.py):
            -- as many workers wake as the jobs need, taking turns by job id, and every
            -- worker's claims of the queue start no later than these jobs; jobs that
            -- need labels wake every worker (count 0), as only some may take them.
            PERFORM pg_notify('qe_wake', r.first || ' '
                || CASE WHEN r.labelled THEN 0 ELSE r.runnable END || ' 0 '
                || r.priority || ' ' || (extract(epoch FROM r.run_at) * 1000000)::bigint
                || ' ' || r.queue);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

CREATE TRIGGER queue_engine_job_inserted
AFTER INSERT ON queue_engine_job
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION queue_engine_job_inserted();
