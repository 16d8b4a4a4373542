"""Two kinds sharing one queue, for the kill switch tests (tests/worker/test_kill_switch.py)."""

from __future__ import annotations

from queue_engine import job


@job(kind="tests.switch.paused", queue="switch")
def paused_kind(n: int = 0) -> int:
    return n


@job(kind="tests.switch.other", queue="switch")
def other_kind(n: int = 0) -> int:
    return n
