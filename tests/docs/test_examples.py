"""Every code example of the manual runs here, page by page, so that none of them rots.

Jobs run in real `runworker --burst` processes on the test database; how blocks are
marked is in tests/support/doc_blocks.py and docs/contributing.md.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import shlex
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core import checks
from django.test import override_settings

from tests.support.doc_blocks import Block, blocks, page_name, pages
from tests.support.workers import ROOT, Workers

HOST_FILES = {"settings.py", "urls.py", "asgi.py"}
PAGES = [path for path in pages() if any(b.mark is None for b in blocks(path))]


class Page:
    """One page's example project: its files under `root`, its namespace, its workers."""

    def __init__(self, path: Path, tmp_path: Path) -> None:
        self.name = page_name(path)
        self.root = tmp_path / "project"
        self.root.mkdir()
        self.workers = Workers(tmp_path)
        self.job_modules: list[str] = []
        self.packages: set[str] = set()
        self.module = types.ModuleType("docs_page_" + self.name.replace("/", "_")[:-3])
        self.namespace = self.module.__dict__

    def run(self, block: Block) -> None:
        if block.lang == "python" and block.title and Path(block.title).name == "settings.py":
            check_settings(block)
        elif block.lang == "python" and block.title:
            self.write(block)
        elif block.lang == "python":
            exec(compile(block.code, block.where, "exec"), self.namespace)
        elif block.lang == "pycon":
            self.doctest(block)
        elif block.lang == "sh":
            self.shell(block)
        elif block.lang == "yaml":
            assert yaml.safe_load(block.code) is not None, f"{block.where}: empty YAML"

    def write(self, block: Block) -> None:
        relative = Path(block.title or "")
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        for parent in relative.parents:
            if parent != Path("."):
                (self.root / parent / "__init__.py").touch()
        target.write_text(block.code)
        self.packages.add(relative.parts[0].removesuffix(".py"))
        dotted = ".".join(relative.with_suffix("").parts)
        if relative.name not in HOST_FILES:
            self.job_modules.append(dotted)
        forget(self.packages)
        importlib.invalidate_caches()
        if relative.name in HOST_FILES:
            importlib.import_module(dotted)

    def doctest(self, block: Block) -> None:
        test = doctest.DocTestParser().get_doctest(
            block.code, self.namespace, block.where, block.page, block.line
        )
        report: list[str] = []
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        result = runner.run(test, out=report.append, clear_globs=False)
        self.namespace.update(test.globs)
        assert result.failed == 0, f"{block.where}:\n" + "".join(report)

    def shell(self, block: Block) -> None:
        for line in block.code.splitlines():
            command = shlex.split(line, comments=True)
            if command[:3] != ["python", "manage.py", "runworker"] or "--burst" not in command:
                continue
            env = self.workers.env(
                JOBSITE_JOB_MODULES=",".join(self.job_modules),
                PYTHONPATH=f"{self.root}:{ROOT}",
            )
            done = subprocess.run(
                [sys.executable, "manage.py", *command[2:], "--poll-interval", "0.2"],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, f"{block.where}: {line}\n{done.stdout}{done.stderr}"


def check_settings(block: Block) -> None:
    """A settings fragment: its apps import, and Django's system checks pass with it."""
    values: dict[str, Any] = {}
    exec(compile(block.code, block.where, "exec"), values)
    values = {name: value for name, value in values.items() if name.isupper()}
    assert values, f"{block.where}: a settings fragment that sets nothing"
    for app in values.pop("INSTALLED_APPS", []):
        assert importlib.util.find_spec(app) is not None, f"{block.where}: {app} is not installed"
    values.pop("DATABASES", None)  # the test database stays
    with override_settings(**values):
        problems = [m for m in checks.run_checks(include_deployment_checks=False) if m.is_serious()]
    assert not problems, f"{block.where}: {problems}"


def forget(packages: set[str]) -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in packages:
            del sys.modules[name]


@pytest.mark.slow
@pytest.mark.parametrize("path", PAGES, ids=[page_name(p) for p in PAGES])
def test_the_examples_of_a_page_run(path: Path, transactional_db: None, tmp_path: Path) -> None:
    from queue_engine.console.roles import ensure_roles

    ensure_roles()  # as `migrate` leaves them; the previous test's flush removed them
    page = Page(path, tmp_path)
    sys.modules[page.module.__name__] = page.module
    sys.path.insert(0, str(page.root))
    try:
        for block in blocks(path):
            if block.mark is None:
                page.run(block)
    finally:
        sys.path.remove(str(page.root))
        forget(page.packages | {page.module.__name__})
