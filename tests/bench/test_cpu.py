"""The CPU sampler of the load scenarios: stopping it never hangs the bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cpu import STOP_PATIENCE

ROOT = Path(__file__).resolve().parents[2]

# A bench process in miniature: start the sampler, let it take readings, do `what` to
# its process, stop it, and say how long stop() took and what it gave.
BENCH = """
import json, multiprocessing, os, signal, sys, time
from bench.cpu import CpuSampler

sampler = CpuSampler().start()
time.sleep(2.5)  # a reading at the start, then one a second; it now waits for the next
[process] = multiprocessing.active_children()
what = sys.argv[1]
if what == "kill":
    os.kill(process.pid, signal.SIGKILL)
    process.join(5)
elif what == "freeze":
    os.kill(process.pid, signal.SIGSTOP)  # deaf to the message, and to SIGTERM
started = time.monotonic()
sampler.stop()
print(json.dumps({
    "took": time.monotonic() - started,
    "readings": len(sampler.readings),
    "rows": len(sampler.rows()),
    "left": len(multiprocessing.active_children()),
}))
"""


def stop_sampler(what: str, timeout: float) -> dict[str, float]:
    """Run BENCH in a process of its own: a stop() that hangs fails the test, not the run."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", BENCH, what],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"CpuSampler.stop() hung ({what}): the bench would have stopped for good")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_stop_gives_the_readings_taken() -> None:
    stopped = stop_sampler("nothing", timeout=30)

    assert stopped["took"] < 1.0
    assert stopped["readings"] >= 2 and stopped["rows"] >= 1
    assert stopped["left"] == 0


def test_stop_returns_promptly_when_the_sampler_died_while_it_waited() -> None:
    stopped = stop_sampler("kill", timeout=30)

    assert stopped["took"] < 1.0
    assert stopped["readings"] >= 2  # those it wrote before it died
    assert stopped["left"] == 0


def test_stop_ends_a_sampler_that_does_not_answer() -> None:
    stopped = stop_sampler("freeze", timeout=30)

    assert stopped["took"] < 3 * STOP_PATIENCE
    assert stopped["readings"] >= 2
    assert stopped["left"] == 0
