"""Signal to resume against pickup latency, in the same run (see bench/scenarios/parked.py)."""

from __future__ import annotations

from typing import Any

from bench.harness import BenchEnv
from bench.scenarios.parked import signal_resume

NAME = "signal_resume"


def run(env: BenchEnv) -> list[dict[str, Any]]:
    return [signal_resume(env)]
