"""Connection strings for the engine's own psycopg connections (worker, listener), and a
server-binding cursor on Django's own connection for the enqueue statements."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg.conninfo import make_conninfo


@contextmanager
def bound_cursor() -> Iterator[psycopg.Cursor[Any]]:
    """A psycopg cursor on Django's connection (so in the caller's transaction), with
    Django's error classes and broken-transaction check, that binds parameters on the
    server. Run its statements with `prepare=prepared()`."""
    with connection.wrap_database_errors, psycopg.Cursor(raw_connection(connection)) as cursor:
        yield cursor


_raw_cursors: weakref.WeakKeyDictionary[psycopg.Connection[Any], psycopg.RawCursor[Any]] = (
    weakref.WeakKeyDictionary()
)


def raw_cursor(db: BaseDatabaseWrapper) -> psycopg.RawCursor[Any]:
    """`bound_cursor` for statements written with $n placeholders and run with a tuple
    of parameters (no placeholder conversion on each execute), one kept per connection:
    the single enqueue's hot path. Run it inside `db.wrap_database_errors`."""
    raw = raw_connection(db)
    cursor = _raw_cursors.get(raw)
    if cursor is None or cursor.closed:
        cursor = _raw_cursors[raw] = psycopg.RawCursor(raw)
    return cursor


def raw_connection(db: BaseDatabaseWrapper) -> psycopg.Connection[Any]:
    """Django's psycopg connection, opened, outside any broken transaction, and set to
    prepare the statements run with prepare=True (see `prepared`)."""
    db.ensure_connection()
    db.validate_no_broken_transaction()
    raw: psycopg.Connection[Any] = db.connection
    if raw.prepare_threshold is None and prepared():
        # Django opens its connections with prepare_threshold=None, and psycopg then
        # ignores prepare=True. A threshold no query reaches prepares exactly the
        # statements run with prepare=True: Django's own queries stay unprepared.
        raw.prepare_threshold = 2**31 - 1
    return raw


def prepared() -> bool | None:
    """Whether to run the enqueue statements as prepared statements.

    Django's own cursors bind on the client and prepare nothing: every INSERT is a new
    text for Postgres to parse and plan, about a quarter of a single enqueue's time.
    QUEUE_ENGINE['PREPARED_STATEMENTS'] = False is for poolers that cannot keep
    prepared statements (PgBouncer in transaction mode before 1.21); a DATABASE_URL
    that is such a pooler (DATABASE_DIRECT_URL set) turns them off by itself.
    """
    from queue_engine.conf import option

    if connection.settings_dict.get("DIRECT"):
        return None  # a pooler in transaction mode (DATABASE_DIRECT_URL is set)
    return True if option("PREPARED_STATEMENTS") else None


def conninfo(alias: str = "default", *, session: bool = False, **overrides: Any) -> str:
    """The libpq connection string of a Django database alias (the test database in tests).

    `session`: for a connection that needs a server session of its own (LISTEN, advisory
    locks, prepared statements): DATABASE_DIRECT_URL's database when DATABASE_URL is a
    pooler in transaction mode (jobsite.database)."""
    s = connections[alias].settings_dict
    if session and s.get("DIRECT"):
        s = s["DIRECT"]
    params: dict[str, Any] = {
        "dbname": s["NAME"],
        "user": s.get("USER") or None,
        "password": s.get("PASSWORD") or None,
        "host": s.get("HOST") or None,
        "port": s.get("PORT") or None,
    }
    for key, value in (s.get("OPTIONS") or {}).items():
        if key not in (
            "pool",
            "server_side_binding",
            "isolation_level",
            "assume_role",
            "prepare_threshold",
            "cursor_factory",
        ):
            params[key] = value
    params.update(overrides)
    return make_conninfo(**{k: v for k, v in params.items() if v is not None})
