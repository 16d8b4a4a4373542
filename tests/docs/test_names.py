"""No page of the manual names what the code does not have."""

from __future__ import annotations

import re
from importlib import import_module
from pathlib import Path

from tests.support.doc_blocks import page_name, pages

DOTTED = re.compile(r"\bqueue_engine(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"^\s*from (queue_engine[\w.]*) import \(?([\w, ]+)", re.M)
CHECKS = Path(__file__).resolve().parents[2] / "queue_engine" / "checks.py"
# Names the adoption work (issue 42) brings on another branch: each must still be
# missing here; once it lands, this test fails until the name leaves this set.
PENDING: set[str] = set()


def resolves(name: str) -> bool:
    """Whether `name` is a module, or an attribute reached from the longest module prefix."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                target = getattr(target, attribute)
        except AttributeError:
            return False
        return True
    return False


def names_on(path: Path) -> set[str]:
    text = path.read_text()
    found = set(DOTTED.findall(text))
    for module, imported in FROM_IMPORT.findall(text):
        found |= {f"{module}.{name.strip()}" for name in imported.split(",") if name.strip()}
    return found


def test_every_queue_engine_name_in_the_manual_exists(db: None) -> None:
    from queue_engine.console.roles import PERMISSIONS

    checks = CHECKS.read_text()
    missing = []
    for path in pages():
        for name in sorted(names_on(path)):
            suffix = name.removeprefix("queue_engine.")
            if suffix in PERMISSIONS:  # a permission, app_label.codename
                continue
            if re.fullmatch(r"[EW]\d{3}", suffix):  # a system check's id
                if f'"{name}"' not in checks:
                    missing.append(f"{page_name(path)}: {name} (no such system check)")
                continue
            if name == "queue_engine.__all__" or name in PENDING:
                continue
            if not resolves(name):
                missing.append(f"{page_name(path)}: {name}")
    assert not missing, "names the code does not have:\n" + "\n".join(missing)


def test_the_names_the_adoption_work_brings_are_still_pending() -> None:
    landed = sorted(name for name in PENDING if resolves(name))
    assert not landed, f"{landed} exist now: remove them from PENDING in {__file__}"
