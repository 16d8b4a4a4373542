from queue_engine.models.audit import AuditEvent
from queue_engine.models.console import ConsoleAccess
from queue_engine.models.flows import FlowCountdown, FlowEdge, FlowRange, FlowRelease, FlowRun
from queue_engine.models.jobs import Job, JobRecord
from queue_engine.models.kinds import KindControl
from queue_engine.models.logs import JobLog
from queue_engine.models.metrics import MetricBucket, RollupState, ScrapeFailure
from queue_engine.models.queues import (
    ClaimLog,
    GroupLimit,
    GroupWeight,
    QueueConfig,
    QueueDefaults,
)
from queue_engine.models.schedules import MissedFirePolicy, Schedule, ScheduleSource
from queue_engine.models.signals import JobSignal
from queue_engine.models.steps import JobStep
from queue_engine.models.workers import WorkerProcess
from queue_engine.states import FlowState, JobState, RecordState

__all__ = [
    "AuditEvent",
    "ClaimLog",
    "ConsoleAccess",
    "FlowCountdown",
    "FlowEdge",
    "FlowRange",
    "FlowRelease",
    "FlowRun",
    "FlowState",
    "GroupLimit",
    "GroupWeight",
    "Job",
    "JobLog",
    "JobRecord",
    "JobSignal",
    "JobState",
    "JobStep",
    "KindControl",
    "MetricBucket",
    "MissedFirePolicy",
    "QueueConfig",
    "QueueDefaults",
    "RecordState",
    "RollupState",
    "Schedule",
    "ScheduleSource",
    "ScrapeFailure",
    "WorkerProcess",
]
