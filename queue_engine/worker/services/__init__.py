"""Leader services, one file each: what exactly one process of the fleet runs at a time.

Every service has the shape of `service.Service` (a name, its interval, one run step,
close); `runner.Every` runs it on the leader's ticks. `leader_services` lists them in
the order each tick runs them.
"""

from __future__ import annotations

from queue_engine.worker.services.claim_log import ClaimLog
from queue_engine.worker.services.flow_countdown import FlowRelease
from queue_engine.worker.services.partitions import Partitions, keep_partitions
from queue_engine.worker.services.promoter import Promoter
from queue_engine.worker.services.rescuer import Rescuer
from queue_engine.worker.services.retention import Retention, delete_expired
from queue_engine.worker.services.rollup import Rollup, roll_up
from queue_engine.worker.services.runner import Every
from queue_engine.worker.services.scheduler import Scheduler, fire_due_schedules
from queue_engine.worker.services.service import Service
from queue_engine.worker.services.stale_workers import StaleWorkers
from queue_engine.worker.services.vacuum import LiveTableVacuum


def leader_services(*, conninfo: str, max_rescues: int, flow_chunk: int) -> list[Service]:
    """The leader's services, in the order each tick runs them."""
    return [
        Promoter(),
        Rescuer(max_rescues=max_rescues),
        FlowRelease(chunk=flow_chunk),
        StaleWorkers(),
        ClaimLog(),
        Scheduler(),
        Rollup(conninfo),
        Partitions(),
        Retention(),
        LiveTableVacuum(conninfo),
    ]


__all__ = [
    "ClaimLog",
    "Every",
    "FlowRelease",
    "LiveTableVacuum",
    "Partitions",
    "Promoter",
    "Rescuer",
    "Retention",
    "Rollup",
    "Scheduler",
    "Service",
    "StaleWorkers",
    "delete_expired",
    "fire_due_schedules",
    "keep_partitions",
    "leader_services",
    "roll_up",
]
