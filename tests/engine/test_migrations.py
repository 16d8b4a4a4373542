"""Migrations are frozen: what an applied migration installs never changes afterwards."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from queue_engine.console.roles import PERMISSIONS, ROLES
from queue_engine.schema import HERE, load_sql

MIGRATIONS = HERE.parent / "migrations"


def newest_copy(name: str) -> Path:
    """The latest migration's copy of schema/<name>."""
    copies = sorted((MIGRATIONS / "sql").glob(f"[0-9][0-9][0-9][0-9]_{name}"))
    assert copies, f"no migration installs schema/{name}"
    return copies[-1]


def test_the_sql_the_engine_runs_is_what_the_newest_migration_installed() -> None:
    for source in sorted(HERE.glob("*.sql")):
        copy = newest_copy(source.name)

        assert copy.read_text(encoding="utf-8") == load_sql(source.name), (
            f"schema/{source.name} differs from {copy.name}: add a migration that installs "
            f"the new text (copy it to migrations/sql/<number>_{source.name}), never edit "
            f"{copy.name}"
        )


def test_no_migration_imports_the_engine_for_what_it_installs() -> None:
    for path in sorted(MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = [
            node
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and re.match(r"queue_engine\b", node.module or "")
        ]

        assert not top_level, f"{path.name} imports {[n.module for n in top_level]}"


def test_the_roles_migration_gives_the_roles_the_console_checks() -> None:
    source = (MIGRATIONS / "0003_console_roles.py").read_text(encoding="utf-8")
    namespace: dict[str, object] = {}
    exec(compile(source, "0003", "exec"), namespace)

    assert namespace["PERMISSIONS"] == PERMISSIONS
    assert namespace["ROLES"] == ROLES
