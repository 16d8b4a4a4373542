"""Leader services, one file each: what exactly one process of the fleet runs at a time.

Each is an async function of the leader's connection that does a bounded amount of work
in short transactions; `Every` runs one at most once per interval, and again at once
while it says more work is waiting. `leader_services` is the list the leader runs, in
order, on every tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import psycopg

from queue_engine.worker.services.claim_log import prune_claim_log
from queue_engine.worker.services.flow_countdown import finish_countdowns
from queue_engine.worker.services.partitions import INTERVAL as PARTITIONS_INTERVAL
from queue_engine.worker.services.partitions import keep_partitions
from queue_engine.worker.services.promoter import promote_due
from queue_engine.worker.services.rescuer import rescue_expired
from queue_engine.worker.services.retention import Swept, delete_expired
from queue_engine.worker.services.rollup import Rollup, roll_up
from queue_engine.worker.services.scheduler import fire_due_schedules
from queue_engine.worker.services.stale_workers import sweep_stale_workers
from queue_engine.worker.services.vacuum import CHECK_INTERVAL as VACUUM_CHECK_INTERVAL
from queue_engine.worker.services.vacuum import LiveTableVacuum

log = logging.getLogger("queue_engine.worker")

# Seconds between two runs of a service; 0 runs it on every tick (PROMOTE_INTERVAL).
PROMOTE_INTERVAL = 0.5  # the tick: scheduled jobs start at most about this late
RESCUE_INTERVAL = 1.0
SWEEP_INTERVAL = 30.0
SCHEDULE_INTERVAL = 0.0
ROLLUP_INTERVAL = 10.0
RETENTION_INTERVAL = 60.0

type Service = Callable[[psycopg.AsyncConnection], Awaitable[Any]]


class Every:
    """Run a service at most once per interval, and again at once while work is waiting
    (a service whose result has `more` set).

    Connection errors go up to the leader (which reconnects); any other error is
    logged and the service tries again after its interval, so that one broken
    service never stops the others.
    """

    def __init__(self, interval: float, service: Service) -> None:
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
            self.more = bool(getattr(await self.service(conn), "more", False))
        except (asyncio.CancelledError, psycopg.OperationalError, psycopg.InterfaceError):
            raise
        except Exception:
            self.more = False
            name = getattr(getattr(self.service, "func", self.service), "__name__", "?")
            log.exception("leader service %s failed; retrying in %ss", name, self.interval)

    async def close(self) -> None:
        """Stop what the service runs in the background (its own connection, a task)."""
        close = getattr(self.service, "close", None)
        if close is not None:
            await close()


def leader_services(*, conninfo: str, max_rescues: int, flow_chunk: int) -> list[Every]:
    """The leader's services, in the order each tick runs them."""
    return [
        Every(0.0, promote_due),
        Every(RESCUE_INTERVAL, partial(rescue_expired, max_rescues=max_rescues)),
        Every(RESCUE_INTERVAL, partial(finish_countdowns, chunk=flow_chunk)),
        Every(SWEEP_INTERVAL, sweep_stale_workers),
        Every(SWEEP_INTERVAL, prune_claim_log),
        Every(SCHEDULE_INTERVAL, fire_due_schedules),
        Every(ROLLUP_INTERVAL, Rollup(conninfo)),
        Every(PARTITIONS_INTERVAL, keep_partitions),
        Every(RETENTION_INTERVAL, partial(delete_expired, swept=Swept())),
        Every(VACUUM_CHECK_INTERVAL, LiveTableVacuum(conninfo)),
    ]


__all__ = [
    "Every",
    "LiveTableVacuum",
    "Rollup",
    "delete_expired",
    "fire_due_schedules",
    "keep_partitions",
    "leader_services",
    "roll_up",
]
