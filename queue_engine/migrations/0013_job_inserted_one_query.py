import importlib

from django.db import migrations

BEFORE = importlib.import_module("queue_engine.migrations.0009_queue_defaults")

# As 0009, in one query for the usual case. 0009 ran three statements on every insert:
# read the defaults, insert-or-nothing the queue's configuration, then list the queues
# to wake. Now one query lists each queue of the statement's rows with whether it has
# a configuration yet and whether a row is runnable now; the defaults are read and the
# configuration written only for a queue seen for the first time. On one job per
# statement this was most of the gap to a bare INSERT with a NOTIFY trigger.
JOB_INSERTED = """
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
"""


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0012_group_rooms_one_count")]

    operations = [
        migrations.RunSQL(JOB_INSERTED, BEFORE.JOB_INSERTED),
    ]
