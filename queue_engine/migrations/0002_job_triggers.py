from django.db import migrations

# After each INSERT statement on the live table: create QueueConfig rows for new
# queue names, and wake workers with one NOTIFY per queue that got runnable jobs.
# The payload is the queue name only, never a row.
JOB_INSERTED = """
CREATE OR REPLACE FUNCTION queue_engine_job_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
BEGIN
    INSERT INTO queue_engine_queueconfig (name)
    SELECT DISTINCT queue FROM new_rows
    ON CONFLICT (name) DO NOTHING;
    FOR q IN SELECT DISTINCT queue FROM new_rows WHERE state = 'available' LOOP
        PERFORM pg_notify('qe_wake', q);
    END LOOP;
    RETURN NULL;
END
$$;

CREATE TRIGGER queue_engine_job_inserted
AFTER INSERT ON queue_engine_job
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION queue_engine_job_inserted();
"""

DROP = """
DROP TRIGGER IF EXISTS queue_engine_job_inserted ON queue_engine_job;
DROP FUNCTION IF EXISTS queue_engine_job_inserted();
"""


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0001_initial")]

    operations = [migrations.RunSQL(JOB_INSERTED, DROP)]
