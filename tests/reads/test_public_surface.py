"""`queue_engine.reads` offers one explicit list: every public function and class of its
modules, nothing they import (json, connection, psycopg...)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import queue_engine.reads as reads

HERE = Path(reads.__file__).resolve().parent
INTERNAL = {"timeout"}  # the console's session helpers: only time_limited is offered


def defined(module: str) -> set[str]:
    tree = ast.parse((HERE / f"{module}.py").read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
    }


def test_each_module_lists_what_it_defines_and_the_package_offers_it() -> None:
    for path in sorted(HERE.glob("[a-z]*.py")):
        module = importlib.import_module(f"queue_engine.reads.{path.stem}")
        listed = set(module.__all__)

        assert defined(path.stem) <= listed, f"reads/{path.name}: add to __all__"
        if path.stem not in INTERNAL:
            assert listed <= set(reads.__all__), f"reads/__init__.py: import from {path.name}"


def test_the_package_offers_nothing_it_merely_imports() -> None:
    for name in reads.__all__:
        offered = getattr(reads, name)
        if callable(offered):
            assert offered.__module__.startswith("queue_engine."), name

    assert not {"json", "connection", "psycopg", "transaction"} & set(dir(reads))
