"""The hand-written baseline's loop processes: stopping them never hangs the bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.workers import database_url_for_tests

ROOT = Path(__file__).resolve().parents[2]

# Two loops, connected and waiting for go(); one dies while it waits; then stop().
BENCH = """
import json, os, signal, sys, time
from bench import worker_baseline

loops = worker_baseline.start(sys.argv[1], "bench", 2)
os.kill(loops.pids[0], signal.SIGKILL)
# The killed loop is gone meanwhile; stop() must return promptly all the same.
time.sleep(0.5)
started = time.monotonic()
loops.stop(timeout=5)
print(json.dumps({"took": time.monotonic() - started, "alive": loops.alive()}))
"""


def test_stop_returns_promptly_when_a_loop_died_waiting_for_go() -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", BENCH, database_url_for_tests()],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("Loops.stop() hung: the bench would have stopped for good")

    stopped = json.loads(done.stdout)
    assert stopped["took"] < 2.0
    assert stopped["alive"] == 0
