"""Postgres out of reach: when to try again, and one note in the log per outage."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterator

log = logging.getLogger("queue_engine.worker")

# A retry waits a random share of a ceiling that doubles from FIRST_WAIT up to
# LONGEST_WAIT: work resumes at most about LONGEST_WAIT after Postgres answers again,
# and a fleet of workers does not knock on a starting server in lockstep.
FIRST_WAIT = 0.05
LONGEST_WAIT = 1.0
# A connection opened before an outage that fails this soon after it is a casualty of
# that outage: an idle connection only finds out at its next use.
AFTERMATH = 30.0


def retry_waits() -> Iterator[float]:
    """Seconds to wait before each retry: none before the first, then full jitter."""
    yield 0.0
    ceiling = FIRST_WAIT
    while True:
        yield random.uniform(0.0, ceiling)
        ceiling = min(ceiling * 2, LONGEST_WAIT)


def describe(exc: BaseException) -> str:
    """An error on one line, short enough for a log line."""
    return " ".join(str(exc).split())[:200]


class Outage:
    """Postgres as this process's connections see it, noted once when the first of them
    loses it and once when the first gets through again. The rest of the story (the
    other connections losing it and reconnecting) goes to the debug log."""

    def __init__(self) -> None:
        self.began: float | None = None  # time.monotonic() of the first loss
        self.last: tuple[float, float] | None = None  # the last outage's start and end

    def lost(self, who: str, exc: BaseException, opened_at: float | None) -> None:
        """`who`'s connection, opened at `opened_at` (None: never), broke or was refused."""
        now = time.monotonic()
        if self.began is None and not self._cut_by_last(opened_at, now):
            self.began = now
            log.warning("Postgres out of reach (%s: %s); reconnecting", who, describe(exc))
        else:
            log.debug("%s: %s; reconnecting", who, describe(exc))

    def back(self, who: str) -> None:
        """`who` has connected."""
        if self.began is None:
            return
        now = time.monotonic()
        log.info("Postgres back after %.1fs (%s connected first)", now - self.began, who)
        self.last = (self.began, now)
        self.began = None

    def _cut_by_last(self, opened_at: float | None, now: float) -> bool:
        return (
            self.last is not None
            and opened_at is not None
            and opened_at < self.last[0]
            and now - self.last[1] < AFTERMATH
        )


# A worker process holds one Worker: what its connections see is the worker's outage.
OUTAGE = Outage()
