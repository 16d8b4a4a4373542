"""The console in a real browser: a live daphne on the test database, and what the browser
tests share (the password of their users, screenshots, a wait inside the page)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.workers import ROOT, database_url_for_tests, production_environ

CHROMIUM = os.environ.get("JOBSITE_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "tests" / "artifacts"
JOB_MODULES = "tests.support.jobs,tests.browser.jobs"
PASSWORD = "browser-pw-123"


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
                # This wait's poll interval.
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
