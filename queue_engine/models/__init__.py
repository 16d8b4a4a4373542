from queue_engine.models.audit import AuditEvent
from queue_engine.models.jobs import Job, JobRecord, JobState, RecordState
from queue_engine.models.logs import JobLog
from queue_engine.models.queues import QueueConfig
from queue_engine.models.workers import WorkerProcess

__all__ = [
    "AuditEvent",
    "Job",
    "JobLog",
    "JobRecord",
    "JobState",
    "QueueConfig",
    "RecordState",
    "WorkerProcess",
]
