"""A scenario's deadline: past it, Overdue is raised in the scenario, which stops its
workers on the way out (bench.workers.fleet), and the harness reports what it kept."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

# Seconds a scenario may run when neither --deadline nor the scenario says otherwise.
DEADLINE = 3600.0


class Overdue(BaseException):
    """Raised in a scenario past its deadline. Not an Exception, so that no scenario's
    `except Exception` takes it for a failure of its own and goes on."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise Overdue in this (the main) thread after `seconds`, once, unless the block
    has ended by then. A blocking wait is interrupted too: the signal's handler runs
    as soon as the wait returns with EINTR."""
    armed = True

    def overdue(signum: int, frame: object) -> None:
        nonlocal armed
        if armed:
            armed = False  # once: the cleanup on the way out is not interrupted again
            raise Overdue

    previous = signal.signal(signal.SIGALRM, overdue)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        try:
            yield
        finally:
            armed = False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
