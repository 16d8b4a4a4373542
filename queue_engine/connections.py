"""Connection strings for the engine's own psycopg connections (worker, listener)."""

from __future__ import annotations

from typing import Any

from django.db import connections
from psycopg.conninfo import make_conninfo


def conninfo(alias: str = "default", **overrides: Any) -> str:
    """The libpq connection string of a Django database alias (the test database in tests)."""
    s = connections[alias].settings_dict
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
