"""Leader services: the schedule firer, the retention collector, the metrics rollup.

Each is one async function of the leader's connection that does a bounded
amount of work in short transactions and says whether more is waiting. The
leader calls the throttled wrappers below on every tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Protocol

import psycopg

from queue_engine.worker.services.retention import Swept, delete_expired
from queue_engine.worker.services.rollup import roll_up
from queue_engine.worker.services.scheduler import fire_due_schedules

log = logging.getLogger("queue_engine.worker")

SCHEDULE_INTERVAL = 0.0  # every leader tick (half a second)
ROLLUP_INTERVAL = 10.0
RETENTION_INTERVAL = 60.0


class Outcome(Protocol):
    @property
    def more(self) -> bool: ...


class Every:
    """Run a service at most once per interval, and again at once while work is waiting.

    Connection errors go up to the leader (which reconnects); any other error is
    logged and the service tries again after its interval, so that one broken
    service never stops the others.
    """

    def __init__(
        self, interval: float, service: Callable[[psycopg.AsyncConnection], Awaitable[Outcome]]
    ) -> None:
        self.interval = interval
        self.service = service
        self.last = float("-inf")
        self.more = False

    async def __call__(self, conn: psycopg.AsyncConnection) -> None:
        now = time.monotonic()
        if not self.more and now - self.last < self.interval:
            return
        self.last = now
        try:
            self.more = (await self.service(conn)).more
        except (asyncio.CancelledError, psycopg.OperationalError, psycopg.InterfaceError):
            raise
        except Exception:
            self.more = False
            name = getattr(getattr(self.service, "func", self.service), "__name__", "?")
            log.exception("leader service %s failed; retrying in %ss", name, self.interval)


fire_schedules = Every(SCHEDULE_INTERVAL, fire_due_schedules)
roll_up_metrics = Every(ROLLUP_INTERVAL, roll_up)
collect_garbage = Every(RETENTION_INTERVAL, partial(delete_expired, swept=Swept()))

__all__ = [
    "collect_garbage",
    "delete_expired",
    "fire_due_schedules",
    "fire_schedules",
    "roll_up",
    "roll_up_metrics",
]
