"""Running tests/support/obs_jobs.py's jobs in a real worker with chosen QUEUE_ENGINE options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.workers import Workers

MODULES = "tests.support.jobs,tests.support.obs_jobs"


def burst(workers: Workers, engine: dict[str, Any] | None = None, **env: str) -> str:
    """One `runworker --burst` with QUEUE_ENGINE options added; its output."""
    done = workers.run_burst(
        timeout=60,
        env={
            "DJANGO_SETTINGS_MODULE": "tests.support.settings_queues",
            "TEST_QUEUE_ENGINE": json.dumps(engine or {}),
            "JOBSITE_JOB_MODULES": MODULES,
            **env,
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
