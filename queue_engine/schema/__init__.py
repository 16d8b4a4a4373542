"""The SQL functions and triggers the migrations install, one readable file per concern.

Migration 0002_sql runs these files as they are in the source tree, so the text here is
what the database runs.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def load_sql(name: str) -> str:
    """The text of schema/<name> (e.g. "jobs.sql")."""
    return (HERE / name).read_text(encoding="utf-8")
