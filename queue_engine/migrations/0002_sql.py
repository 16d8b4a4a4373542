"""Every SQL function and trigger of the engine, in its final form, from queue_engine/schema/,
the storage settings of the tables jobs go through, and the history and log tables made
partitioned (queue_engine/schema/partitioned.py)."""

from django.db import migrations

from queue_engine.schema import load_sql
from queue_engine.schema.partitioned import partition_history, partition_logs, unpartition

# The tables jobs go through, row by row (worker/services/vacuum.py's TABLES).
CHURNED = ("queue_engine_job", "queue_engine_jobstep", "queue_engine_flow", "queue_engine_flowedge")


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0001_initial")]

    operations = [
        migrations.RunSQL(
            load_sql("jobs.sql"),
            "DROP TRIGGER IF EXISTS queue_engine_job_inserted ON queue_engine_job;"
            "DROP FUNCTION IF EXISTS queue_engine_job_inserted();",
        ),
        migrations.RunSQL(
            load_sql("claim.sql"),
            "DROP FUNCTION IF EXISTS "
            "queue_engine_limited_rooms(text[], int, text[], text[], int[]);",
        ),
        # Vacuum keeps the empty pages at the end of the tables jobs go through: cutting
        # them off locks out every claim and settle (worker/services/vacuum.py).
        migrations.RunSQL(
            [f"ALTER TABLE {table} SET (vacuum_truncate = false)" for table in CHURNED],
            [f"ALTER TABLE {table} RESET (vacuum_truncate)" for table in CHURNED],
        ),
        migrations.RunPython(partition_history, unpartition("JobRecord")),
        migrations.RunPython(partition_logs, unpartition("JobLog")),
    ]
