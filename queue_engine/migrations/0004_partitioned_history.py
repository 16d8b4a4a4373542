"""The history becomes a partitioned table (queue_engine.history): by state, then by
finish time, so that retention drops whole leaves.

Rows already in the history move to each state's default leaf, where retention
collects them row by row as before; leaves start from now. The models do not change:
Django keeps `id` as the primary key it knows, while the table's primary key is
(id, state, finished_at), as a partitioned table's must hold its partition keys; ids
stay unique, as each comes once from the live table's sequence.
"""

from django.db import migrations

from queue_engine.history import STATES, TABLE, default_leaf, ensure_leaves, state_table

OLD = f"{TABLE}_unpartitioned"


def set_aside(cursor, record):
    """Rename the history out of the way, and drop its indexes (their names are the
    new table's)."""
    cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {OLD}")
    cursor.execute(f"ALTER TABLE {OLD} RENAME CONSTRAINT {TABLE}_pkey TO {OLD}_pkey")
    for index in record._meta.indexes:
        cursor.execute(f'DROP INDEX IF EXISTS "{index.name}"')


def partition(apps, schema_editor):
    record = apps.get_model("queue_engine", "JobRecord")
    with schema_editor.connection.cursor() as cursor:
        set_aside(cursor, record)
        cursor.execute(
            f"CREATE TABLE {TABLE} (LIKE {OLD} INCLUDING DEFAULTS INCLUDING STORAGE) "
            "PARTITION BY LIST (state)"
        )
        cursor.execute(
            f"ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_pkey PRIMARY KEY (id, state, finished_at)"
        )
        for index in record._meta.indexes:
            schema_editor.add_index(record, index)
        for state in STATES:
            cursor.execute(
                f"CREATE TABLE {state_table(state)} PARTITION OF {TABLE} "
                f"FOR VALUES IN ('{state}') PARTITION BY RANGE (finished_at)"
            )
            cursor.execute(f"CREATE TABLE {default_leaf(state)} PARTITION OF {state_table(state)} DEFAULT")
        cursor.execute(f"INSERT INTO {TABLE} SELECT * FROM {OLD}")
        cursor.execute(f"DROP TABLE {OLD}")
        ensure_leaves(cursor, STATES)


def unpartition(apps, schema_editor):
    record = apps.get_model("queue_engine", "JobRecord")
    with schema_editor.connection.cursor() as cursor:
        set_aside(cursor, record)
        cursor.execute(f"CREATE TABLE {TABLE} (LIKE {OLD} INCLUDING DEFAULTS INCLUDING STORAGE)")
        cursor.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_pkey PRIMARY KEY (id)")
        for index in record._meta.indexes:
            schema_editor.add_index(record, index)
        cursor.execute(f"INSERT INTO {TABLE} SELECT * FROM {OLD}")
        cursor.execute(f"DROP TABLE {OLD}")


class Migration(migrations.Migration):
    dependencies = [("queue_engine", "0003_console_roles")]

    operations = [migrations.RunPython(partition, unpartition)]
