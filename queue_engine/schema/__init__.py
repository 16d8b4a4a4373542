"""The SQL functions and triggers of the engine, one readable file per concern.

These files are the engine's current SQL. Migrations install their own frozen copies
(`migrations/sql/<migration>_<name>.sql`): a change here arrives as a new migration that
installs the new text, and `tests/engine/test_migrations.py` fails until it does.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def load_sql(name: str) -> str:
    """The text of schema/<name> (e.g. "jobs.sql")."""
    return (HERE / name).read_text(encoding="utf-8")
