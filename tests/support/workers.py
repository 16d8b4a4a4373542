"""Real `manage.py runworker` subprocesses against the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from django.db import connection

from queue_engine import sql

if TYPE_CHECKING:
    from queue_engine.models import JobRecord

ROOT = Path(__file__).resolve().parents[2]


def database_url_for_tests() -> str:
    s = connection.settings_dict
    user = quote(s.get("USER") or "")
    password = f":{quote(s['PASSWORD'])}" if s.get("PASSWORD") else ""
    host = s.get("HOST") or ""
    if host.startswith("/"):
        return f"postgresql://{user}{password}@/{s['NAME']}?host={host}"
    port = f":{s['PORT']}" if s.get("PORT") else ""
    return f"postgresql://{user}{password}@{host}{port}/{s['NAME']}"


def production_environ() -> dict[str, str]:
    """This process's environment for a worker or daphne subprocess, which runs as in
    production: without DJANGO_ALLOW_ASYNC_UNSAFE, which the browser tests set for
    Playwright (tests/browser/conftest.py) and which would hide ORM calls made from
    async code."""
    return {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str = "condition",
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        # wait_for's poll interval.
        time.sleep(interval)


def ended(job_id: int, timeout: float = 30, *, why: str = "") -> JobRecord:
    """The job's history row, once it has ended (waits up to `timeout` seconds; `why`
    says, when it does not come, what to suspect)."""
    from queue_engine.models import JobRecord

    return wait_for(
        lambda: JobRecord.objects.filter(pk=job_id).first(),
        timeout=timeout,
        message=f"job {job_id} to end{why}",
    )


def listening(count: int = 1) -> bool:
    """Whether at least `count` workers' listeners have LISTENed on this database, and so
    hear every wake-up and control message sent from now on (worker/listener.py)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = 'queue_engine listener' AND state = 'idle'"
            " AND query = %s",
            [sql.LISTEN_WORKER[-1]],
        )
        return int(cursor.fetchone()[0]) >= count


def heard_of_each_other(ids: list[str]) -> bool:
    """Whether each of these workers has beaten since the last of them registered, a
    beat that reads the registry with all of them in it (worker/heartbeat.py); a margin
    past the registration covers its commit."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) = %(n)s AND min(heartbeat_at) > max(started_at) + interval '0.1 s'"
            " FROM queue_engine_workerprocess WHERE id = ANY(%(ids)s)",
            {"n": len(ids), "ids": ids},
        )
        return bool(cursor.fetchone()[0])


class Workers:
    """Start and stop runworker processes; their output goes to files under tmp_path."""

    def __init__(self, tmp_path: Path, database_url: str | None = None) -> None:
        self.tmp_path = tmp_path
        self.database_url = database_url or database_url_for_tests()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = production_environ()
        env.update(
            {
                "DATABASE_URL": self.database_url,
                "JOBSITE_JOB_MODULES": (
                    "tests.support.jobs,tests.support.step_jobs,tests.support.kind_jobs,"
                    "tests.support.wait_jobs"
                ),
                "DJANGO_SETTINGS_MODULE": "jobsite.settings",
                "PYTHONUNBUFFERED": "1",
                "JOBSITE_DB_POOL": "0",  # importing jobsite.asgi in a test sets it for daphne
                "JOBSITE_SERVICE_EVENTS": "1",  # tests wait for leader services' steps
            }
        )
        env.update(extra)
        return env

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log_path = self.tmp_path / f"worker-{len(self.logs)}.log"
        self.logs.append(log_path)
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "runworker", "--poll-interval", "0.2", *args],
            cwd=ROOT,
            env=self.env(**(env or {})),
            stdout=log_path.open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        return proc

    def run_burst(
        self, *args: str, timeout: float = 60, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "runworker", "--burst", "--poll-interval", "0.2", *args],
            cwd=ROOT,
            env=self.env(**(env or {})),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def output(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')}" for p in self.logs if p.exists()
        )

    def stop_all(self, timeout: float = 15) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
