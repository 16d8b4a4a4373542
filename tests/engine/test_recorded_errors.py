"""Every error class the engine records by name imports, as django.tasks' `TaskError`
needs (`exception_class` imports `exception_class_path`)."""

from __future__ import annotations

import re
from pathlib import Path

from django.utils.module_loading import import_string

import queue_engine

ENGINE = Path(queue_engine.__file__).resolve().parent
# 'class', 'queue_engine.Cancelled' in SQL; "queue_engine.OutcomeRefused" in Python.
RECORDED = re.compile(r"""['"](queue_engine(?:\.[a-z_]+)*\.[A-Z][A-Za-z]+)['"]""")


def recorded_names() -> set[str]:
    names = set()
    for path in [*ENGINE.rglob("*.py"), *ENGINE.rglob("*.sql")]:
        if "migrations" in path.parts:
            continue
        names.update(RECORDED.findall(path.read_text(encoding="utf-8")))
    return names


def test_every_error_class_the_engine_records_imports() -> None:
    names = recorded_names()

    assert {"queue_engine.Cancelled", "queue_engine.LeaseExpired"} <= names
    assert "queue_engine.OutcomeRefused" in names
    for name in sorted(names):
        assert isinstance(import_string(name), type), name
