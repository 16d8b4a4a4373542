"""The history and the log lines as partitioned tables (queue_engine.history), made by
migration 0002_sql in place of the plain tables 0001_initial creates (empty then).

Django keeps `id` as the models' primary key; the tables' primary keys also hold their
partition keys, as a partitioned table's must. Ids stay unique: each history row takes
its id from the live table's sequence, each log line from its own (a partitioned table
cannot have an identity column before Postgres 17).
"""

from __future__ import annotations

from typing import Any

from queue_engine.history import LOG, LOGS, STATES, TABLE, default_leaf, ensure_leaves, state_table


def _replace(schema_editor: Any, model: Any, partition_by: str, key: str) -> Any:
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


def partition_history(apps: Any, schema_editor: Any) -> None:
    model = apps.get_model("queue_engine", "JobRecord")
    with _replace(schema_editor, model, "LIST (state)", "id, state, finished_at") as cursor:
        for state in STATES:
            cursor.execute(
                f"CREATE TABLE {state_table(state)} PARTITION OF {TABLE} "
                f"FOR VALUES IN ('{state}') PARTITION BY RANGE (finished_at)"
            )
            cursor.execute(
                f"CREATE TABLE {default_leaf(state)} PARTITION OF {state_table(state)} DEFAULT"
            )
        ensure_leaves(cursor, STATES)


def partition_logs(apps: Any, schema_editor: Any) -> None:
    model = apps.get_model("queue_engine", "JobLog")
    with _replace(schema_editor, model, "RANGE (at)", "id, at") as cursor:
        cursor.execute(f"CREATE SEQUENCE {LOGS}_id_seq OWNED BY {LOGS}.id")
        cursor.execute(f"ALTER TABLE {LOGS} ALTER COLUMN id SET DEFAULT nextval('{LOGS}_id_seq')")
        cursor.execute(f"CREATE TABLE {default_leaf(LOG)} PARTITION OF {LOGS} DEFAULT")
        ensure_leaves(cursor, [LOG])


def unpartition(model_name: str) -> Any:
    """The reverse of partition_history or partition_logs: the plain table again."""

    def reverse(apps: Any, schema_editor: Any) -> None:
        model = apps.get_model("queue_engine", model_name)
        schema_editor.delete_model(model)
        schema_editor.create_model(model)

    return reverse
