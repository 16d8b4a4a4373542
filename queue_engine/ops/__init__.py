"""Every operator action. The console, the admin and the CLI call only these.

Each action runs in one transaction together with the AuditEvent that records
it, and refuses what it cannot do with a message that says why.
"""

from queue_engine.ops.changes import actor_name, audit
from queue_engine.ops.flows import cancel_flow, requeue_flow, rerun_flow
from queue_engine.ops.jobs import (
    DeadGroupKey,
    cancel_job,
    cancel_jobs,
    redrive_job,
    redrive_jobs,
    redrive_queue,
    remove_job,
    remove_jobs,
    retry_job,
    retry_jobs,
)
from queue_engine.ops.kinds import pause_kind, paused_kinds, resume_kind
from queue_engine.ops.rerun import plan_rerun_from, rerun_flow_from

__all__ = [
    "DeadGroupKey",
    "actor_name",
    "audit",
    "cancel_flow",
    "cancel_job",
    "cancel_jobs",
    "pause_kind",
    "paused_kinds",
    "plan_rerun_from",
    "redrive_job",
    "redrive_jobs",
    "redrive_queue",
    "remove_job",
    "remove_jobs",
    "requeue_flow",
    "rerun_flow",
    "rerun_flow_from",
    "resume_kind",
    "retry_job",
    "retry_jobs",
]
