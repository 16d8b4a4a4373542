"""Every SQL function and trigger of the engine as 0.1.0 installs them, the storage settings
of the tables jobs go through, and the history and log tables made partitioned.

Frozen: this migration carries its own copies of what it installs (`sql/0002_*.sql`,
and the partitioning DDL below), so an edit to `queue_engine/schema/` never changes
what an applied migration meant. A change to the SQL arrives as a new migration that
installs the new text (tests/engine/test_migrations.py keeps the two in step).
"""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent / "sql"

# The tables jobs go through, row by row (worker/services/vacuum.py's TABLES).
CHURNED = ("queue_engine_job", "queue_engine_jobstep", "queue_engine_flow", "queue_engine_flowedge")
HISTORY = "queue_engine_jobrecord"
LOGS = "queue_engine_joblog"
ENDED = ("succeeded", "failed", "cancelled")


def load(name):
    return (SQL / name).read_text(encoding="utf-8")


def replace(schema_editor, model, partition_by, key):
    """Make `model`'s table again, partitioned, with its columns, defaults and indexes;
    returns the cursor, for the partitions."""
    table = model._meta.db_table
    plain = f"{table}_plain"
    cursor = schema_editor.connection.cursor()
    cursor.execute(f"ALTER TABLE {table} RENAME TO {plain}")
    cursor.execute(f"ALTER TABLE {plain} RENAME CONSTRAINT {table}_pkey TO {plain}_pkey")
    for index in model._meta.indexes:
        cursor.execute(f'DROP INDEX "{index.name}"')  # their names are the new table's
    cursor.execute(
        f"CREATE TABLE {table} (LIKE {plain} INCLUDING DEFAULTS INCLUDING STORAGE) "
        f"PARTITION BY {partition_by}"
    )
    cursor.execute(f"DROP TABLE {plain}")
    cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY ({key})")
    for index in model._meta.indexes:
        schema_editor.add_index(model, index)
    return cursor


def ensure_leaves(cursor, parts):
    # The time-range leaves are housekeeping, not schema: the leader's partitions service
    # keeps them ahead of the clock for ever after; made here so that rows written before
    # a worker first runs land in them, with the engine's current rules.
    from queue_engine.history import ensure_leaves as current

    current(cursor, parts)


def partition_history(apps, schema_editor):
    model = apps.get_model("queue_engine", "JobRecord")
    with replace(schema_editor, model, "LIST (state)", "id, state, finished_at") as cursor:
        for state in ENDED:
            cursor.execute(
                f"CREATE TABLE {HISTORY}_{state} PARTITION OF {HISTORY} "
                f"FOR VALUES IN ('{state}') PARTITION BY RANGE (finished_at)"
            )
            cursor.execute(
                f"CREATE TABLE {HISTORY}_{state}_default PARTITION OF {HISTORY}_{state} DEFAULT"
            )
        ensure_leaves(cursor, ENDED)


def partition_logs(apps, schema_editor):
    model = apps.get_model("queue_engine", "JobLog")
    with replace(schema_editor, model, "RANGE (at)", "id, at") as cursor:
        cursor.execute(f"CREATE SEQUENCE {LOGS}_id_seq OWNED BY {LOGS}.id")
        cursor.execute(f"ALTER TABLE {LOGS} ALTER COLUMN id SET DEFAULT nextval('{LOGS}_id_seq')")
        cursor.execute(f"CREATE TABLE {LOGS}_default PARTITION OF {LOGS} DEFAULT")
        ensure_leaves(cursor, ["log"])


def unpartition(model_name):
    """The reverse of partition_history or partition_logs: the plain table again."""

    def reverse(apps, schema_editor):
        model = apps.get_model("queue_engine", model_name)
        schema_editor.delete_model(model)
        schema_editor.create_model(model)

    return reverse


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0001_initial")]

    operations = [
        migrations.RunSQL(
            load("0002_jobs.sql"),
            "DROP TRIGGER IF EXISTS queue_engine_job_inserted ON queue_engine_job;"
            "DROP FUNCTION IF EXISTS queue_engine_job_inserted();",
        ),
        migrations.RunSQL(
            load("0002_claim.sql"),
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
