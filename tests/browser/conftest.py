"""A live daphne serving the console on the test database, and headless Chromium driving it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from tests.support.workers import ROOT, database_url_for_tests, production_environ

CHROMIUM = os.environ.get("JOBSITE_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "tests" / "artifacts"
JOB_MODULES = "tests.support.jobs,tests.browser.jobs"
PASSWORD = "browser-pw-123"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)
            if not shutil.which(CHROMIUM):
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"{CHROMIUM} is missing: `make browser` installs Chromium from Debian"
                    )
                )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, tmp_path: Path, extra_env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / "daphne.log"
        env = dict(
            production_environ(),
            DATABASE_URL=database_url_for_tests(),
            JOBSITE_JOB_MODULES=JOB_MODULES,
            DJANGO_SETTINGS_MODULE="jobsite.settings",
            PYTHONUNBUFFERED="1",
            JOBSITE_DB_POOL="1",
        )
        env.update(extra_env or {})
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "jobsite.asgi:application",
            ],
            cwd=ROOT,
            env=env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.wait_until_up()

    def wait_until_up(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited:\n{self.output()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"daphne did not listen within {timeout}s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def server(
    transactional_db: None, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Server]:
    from queue_engine.console.roles import ensure_roles

    ensure_roles()
    live = Server(tmp_path)
    yield live
    live.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(live.output())


@pytest.fixture
def chromium(transactional_db: None) -> Iterator[Any]:
    # Per test: Playwright's sync API keeps an event loop running in this thread while it
    # is open, which would break every pytest-asyncio test that runs after it. While that
    # loop runs, Django takes this thread for async code and refuses its ORM calls (the
    # test's own, in a sync test): DJANGO_ALLOW_ASYNC_UNSAFE lets them through for that
    # time only. Subprocesses never get it (tests.support.workers.production_environ). The
    # database comes first, so its flush runs after Playwright has stopped.
    from django.db import connections
    from playwright.sync_api import sync_playwright

    with (
        sync_playwright() as playwright,
        mock.patch.dict(os.environ, {"DJANGO_ALLOW_ASYNC_UNSAFE": "true"}),
    ):
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()
        # Django keeps connections per async context, and the test ran in Playwright's:
        # its connection would stay open and keep the test database from being dropped.
        connections.close_all()


@pytest.fixture
def new_page(chromium: Any, server: Server) -> Iterator[Callable[..., Any]]:
    """A page in a fresh browser context (its own cookies), logged in with the given role."""
    from django.contrib.auth.models import Group, User

    contexts: list[Any] = []

    def make(role: str = "operator", **options: Any) -> Any:
        username = f"{role}-{len(contexts)}"
        user = User.objects.create_user(username, password=PASSWORD)
        user.groups.add(Group.objects.get(name=role))
        options.setdefault("viewport", {"width": 1360, "height": 900})
        context = chromium.new_context(**options)
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
        page.goto(server.url + "/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(server.url + "/")
        return page

    yield make
    for context in contexts:
        context.close()


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def wait_until(page: Any, expression: str, timeout: float = 10000) -> Any:
    """Poll `expression` in the page until it is truthy. Playwright's wait_for_function
    polls through eval() inside the page, which the console's Content-Security-Policy
    forbids; page.evaluate runs outside the page's policy."""
    deadline = time.monotonic() + timeout / 1000
    while True:
        value = page.evaluate(expression)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{expression!r} was still falsy after {timeout / 1000:.0f}s")
        page.wait_for_timeout(20)
