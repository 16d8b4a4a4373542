"""The shape of queue_engine that keeps it readable: no import cycles, no module too long.

An import inside a function counts (a lazy import that dodges a cycle is still a cycle);
an import under TYPE_CHECKING does not, since it never runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "queue_engine"
LONGEST = 500


def cycles(imports: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in imports.get(module, ()):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return found


def test_the_cycle_finder_finds_a_cycle_through_three_modules_and_nothing_else() -> None:
    imports = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e2"], "e2": []}

    assert cycles(imports) == [["a", "b", "c"]]


def test_queue_engine_has_no_import_cycles() -> None:
    graph = grimp.build_graph(
        "queue_engine", include_external_packages=False, exclude_type_checking_imports=True
    )
    imports = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}

    found = cycles(imports)

    described = [
        " <-> ".join(group)
        + ": "
        + "; ".join(f"{a} imports {b}" for a in group for b in imports[a] if b in group)
        for group in found
    ]
    assert not found, "import cycles in queue_engine:\n" + "\n".join(described)


def test_the_console_reads_its_pages_below_its_views_and_sockets() -> None:
    """A page's context (console.pages) is shared by its view and its socket: nothing but
    the URL map imports a view, and the pages import neither views nor sockets."""
    graph = grimp.build_graph(
        "queue_engine", include_external_packages=False, exclude_type_checking_imports=True
    )
    views = "queue_engine.console.views"
    sockets = {"queue_engine.console.consumers", "queue_engine.console.live_pages"}
    found = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            into_views = imported == views or imported.startswith(views + ".")
            from_views = module == views or module.startswith(views + ".")
            if into_views and not from_views and module != "queue_engine.console.urls":
                found.append(f"{module} imports {imported}")
            if module.startswith("queue_engine.console.pages") and (
                into_views or imported in sockets
            ):
                found.append(f"{module} imports {imported}")
    assert found == []


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_no_module_is_longer_than_500_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())

    assert lines <= LONGEST, (
        f"{path.relative_to(PACKAGE.parent)} has {lines} lines; split it by concern"
    )


LONGEST_FUNCTION = 60
SHORT_FUNCTIONS_IN = ("worker", "sql")  # under queue_engine/

# Functions allowed past LONGEST_FUNCTION lines, each with why it is not split (yet).
LONG_FUNCTIONS: dict[str, str] = {}


def long_functions(root: Path, parts: Iterable[str], longest: int) -> dict[str, int]:
    """Every function (decorators included) longer than `longest` lines in the modules
    under root/part, as {"part/module.py::Class.function": lines}."""
    import ast

    found = {}

    def visit(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    first = min([d.lineno for d in child.decorator_list] + [child.lineno])
                    lines = (child.end_lineno or child.lineno) - first + 1
                    if lines > longest:
                        found[f"{path}::{name}"] = lines
                visit(child, path, name + ".")

    for part in parts:
        for module in sorted((root / part).rglob("*.py")):
            visit(ast.parse(module.read_text()), str(module.relative_to(root)), "")
    return found


def test_the_function_finder_finds_long_methods_and_nested_functions(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    body = "\n".join(f"        x{i} = {i}" for i in range(5))
    (tmp_path / "pkg" / "m.py").write_text(
        f"class C:\n    @staticmethod\n    def long():\n{body}\n"
        f"def short():\n    def inner():\n{body}\n"
    )

    assert long_functions(tmp_path, ["pkg"], 6) == {"pkg/m.py::C.long": 7, "pkg/m.py::short": 7}
    assert long_functions(tmp_path, ["pkg"], 5) == {
        "pkg/m.py::C.long": 7,
        "pkg/m.py::short": 7,
        "pkg/m.py::short.inner": 6,
    }


def test_no_function_in_the_worker_or_the_sql_is_longer_than_60_lines() -> None:
    found = long_functions(PACKAGE, SHORT_FUNCTIONS_IN, LONGEST_FUNCTION)

    unlisted = {name: lines for name, lines in found.items() if name not in LONG_FUNCTIONS}
    assert not unlisted, (
        f"functions over {LONGEST_FUNCTION} lines: {unlisted}; split them, or list one "
        "in LONG_FUNCTIONS with the reason it stays whole"
    )
    assert not set(LONG_FUNCTIONS) - set(found), "listed but short now: drop it from the list"


TESTS = PACKAGE.parent / "tests"


def imports_of_tests() -> list[tuple[str, str]]:
    """Every (test file, module) where a file under tests/ imports a test module or a
    conftest: what tests share lives in tests/support/ (helpers) and in a package's
    conftest.py (fixtures, which pytest finds without an import)."""
    import ast

    found = []
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                last = name.rsplit(".", 1)[-1]
                if name.startswith("tests.") and (last.startswith("test_") or last == "conftest"):
                    found.append((str(path.relative_to(TESTS.parent)), name))
    return found


def test_no_test_imports_from_a_test_module_or_a_conftest() -> None:
    assert imports_of_tests() == []


def test_no_browser_test_polls_through_wait_for_function() -> None:
    """Playwright's wait_for_function polls through eval() inside the page, which the
    console's Content-Security-Policy refuses: it passes only when its first poll already
    holds, and fails as soon as a slow machine makes it poll again. tests.support.browser's
    wait_until polls from outside the page's policy."""
    found = [
        str(path.relative_to(TESTS.parent))
        for path in sorted(TESTS.rglob("*.py"))
        if path.name != "test_layout.py" and "wait_for_function(" in path.read_text()
    ]
    assert found == [], f"use tests.support.browser.wait_until in {found}"
