import django.contrib.postgres.fields
import django.db.models.functions.datetime
from django.db import migrations, models

# Rows that existed before settings could set a queue: any value other than the
# model's default was set by someone, so settings must not take it back.
MARK_EDITED = """
UPDATE queue_engine_queueconfig
   SET edited_fields = array_remove(ARRAY[
       CASE WHEN paused THEN 'paused' END,
       CASE WHEN max_concurrency IS NOT NULL THEN 'max_concurrency' END,
       CASE WHEN rate_limit IS NOT NULL THEN 'rate_limit' END,
       CASE WHEN rate_window <> 60 THEN 'rate_window' END,
       CASE WHEN lock_duration <> 60 THEN 'lock_duration' END,
       CASE WHEN group_concurrency IS NOT NULL THEN 'group_concurrency' END,
       CASE WHEN retain_succeeded <> 86400 THEN 'retain_succeeded' END,
       CASE WHEN retain_failed <> 604800 THEN 'retain_failed' END,
       CASE WHEN retain_cancelled <> 86400 THEN 'retain_cancelled' END
   ]::varchar[], NULL)
"""

# As 0002, except that a queue first seen by an enqueue starts from the defaults that
# the last worker start or migrate wrote from QUEUE_ENGINE (the model's defaults when
# there are none, e.g. right after a flush).
JOB_INSERTED = """
CREATE OR REPLACE FUNCTION queue_engine_job_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
    d record;
BEGIN
    SELECT * INTO d FROM queue_engine_queuedefaults WHERE id = 1;
    IF FOUND THEN
        INSERT INTO queue_engine_queueconfig
               (name, paused, max_concurrency, rate_limit, rate_window, lock_duration,
                group_concurrency, retain_succeeded, retain_failed, retain_cancelled)
        SELECT DISTINCT queue, d.paused, d.max_concurrency, d.rate_limit, d.rate_window,
               d.lock_duration, d.group_concurrency, d.retain_succeeded, d.retain_failed,
               d.retain_cancelled
          FROM new_rows
        ON CONFLICT (name) DO NOTHING;
    ELSE
        INSERT INTO queue_engine_queueconfig (name)
        SELECT DISTINCT queue FROM new_rows
        ON CONFLICT (name) DO NOTHING;
    END IF;
    FOR q IN SELECT DISTINCT queue FROM new_rows WHERE state = 'available' LOOP
        PERFORM pg_notify('qe_wake', q);
    END LOOP;
    RETURN NULL;
END
$$;
"""

JOB_INSERTED_0002 = """
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
"""


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0008_console_roles")]

    operations = [
        migrations.AddField(
            model_name="queueconfig",
            name="edited_fields",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=32),
                blank=True,
                db_default=models.Value(
                    [],
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=32)
                    ),
                ),
                help_text="fields an operator changed: settings no longer set them",
            ),
        ),
        migrations.RunSQL(MARK_EDITED, migrations.RunSQL.noop),
        migrations.CreateModel(
            name="QueueDefaults",
            fields=[
                ("paused", models.BooleanField(db_default=False)),
                ("max_concurrency", models.PositiveIntegerField(blank=True, null=True)),
                ("rate_limit", models.PositiveIntegerField(blank=True, null=True)),
                ("rate_window", models.PositiveIntegerField(db_default=60, help_text="seconds")),
                (
                    "lock_duration",
                    models.PositiveIntegerField(db_default=60, help_text="seconds"),
                ),
                ("group_concurrency", models.PositiveIntegerField(blank=True, null=True)),
                (
                    "retain_succeeded",
                    models.PositiveIntegerField(
                        db_default=86400, help_text="seconds to keep succeeded jobs"
                    ),
                ),
                (
                    "retain_failed",
                    models.PositiveIntegerField(
                        db_default=604800, help_text="seconds to keep dead-lettered jobs"
                    ),
                ),
                (
                    "retain_cancelled",
                    models.PositiveIntegerField(
                        db_default=86400, help_text="seconds to keep cancelled jobs"
                    ),
                ),
                (
                    "id",
                    models.PositiveSmallIntegerField(
                        db_default=1, primary_key=True, serialize=False
                    ),
                ),
                (
                    "updated_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
            options={
                "db_table": "queue_engine_queuedefaults",
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("id", 1)), name="qe_queuedefaults_one"
                    )
                ],
            },
        ),
        migrations.RunSQL(JOB_INSERTED, JOB_INSERTED_0002),
    ]
