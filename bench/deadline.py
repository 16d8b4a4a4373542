"""A scenario's deadline: past it, Overdue is raised in the scenario, which stops its
workers on the way out (bench.workers.fleet), and the harness reports what it kept.
If the way out itself hangs for GRACE seconds, the last resort kills the process
groups the bench started and has not stopped (fleets, relays: registered here) and
ends the bench."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

# Seconds a scenario may run when neither --deadline nor the scenario says otherwise.
DEADLINE = 3600.0
# Seconds an overdue scenario has to stop its workers and return.
GRACE = 120.0

# The process groups the bench runs now: worker fleets (bench.workers.Fleet) and relays
# (bench.relay), each in a session of its own.
process_groups: set[int] = set()


class Overdue(BaseException):
    """Raised in a scenario past its deadline. Not an Exception, so that no scenario's
    `except Exception` takes it for a failure of its own and goes on."""


@contextmanager
def deadline(
    seconds: float, last_resort: Callable[[], None], grace: float = GRACE
) -> Iterator[None]:
    """Raise Overdue in this (the main) thread after `seconds`, unless the block has
    ended by then; if the block has not ended `grace` seconds later, kill the process
    groups, call `last_resort` and exit. A blocking wait is interrupted too: the signal's
    handler runs as soon as the wait returns with EINTR."""
    state = "running"

    def overdue(signum: int, frame: object) -> None:
        nonlocal state
        if state == "running":
            state = "overdue"
            signal.setitimer(signal.ITIMER_REAL, grace)  # for the way out
            raise Overdue
        if state == "overdue":  # the way out hangs
            kill_process_groups()
            last_resort()
            os._exit(1)

    previous = signal.signal(signal.SIGALRM, overdue)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        try:
            yield
        finally:
            state = "done"  # an alarm from here on finds the block ended: it does nothing
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def kill_process_groups() -> None:
    for group in list(process_groups):
        with suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
