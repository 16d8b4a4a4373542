-- After each INSERT statement on the live table: give every queue seen for the first
-- time its configuration row (from the defaults the last worker start or migrate wrote
-- from QUEUE_ENGINE, or the model's defaults when there are none, e.g. right after a
-- flush), and wake workers with one NOTIFY per queue that got runnable jobs.
-- The NOTIFY payload is the queue name only, never a row.
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
        SELECT n.queue, bool_or(n.state = 'available') AS runnable,
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
                        group_concurrency, retain_succeeded, retain_failed, retain_cancelled)
                VALUES (r.queue, d.paused, d.max_concurrency, d.rate_limit, d.rate_window,
                        d.lock_duration, d.group_concurrency, d.retain_succeeded,
                        d.retain_failed, d.retain_cancelled)
                ON CONFLICT (name) DO NOTHING;
            ELSE
                INSERT INTO queue_engine_queueconfig (name) VALUES (r.queue)
                ON CONFLICT (name) DO NOTHING;
            END IF;
        END IF;
        IF r.runnable THEN
            PERFORM pg_notify('qe_wake', r.queue);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

CREATE TRIGGER queue_engine_job_inserted
AFTER INSERT ON queue_engine_job
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION queue_engine_job_inserted();
