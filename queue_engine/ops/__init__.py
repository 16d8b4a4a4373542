"""Every operator action. The console, the admin and the CLI call only these.

Each action runs in one transaction together with the AuditEvent that records
it, and refuses what it cannot do with a message that says why. `actor` is who
acts: a user, a name, or None (recorded as "system").
"""

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
    reschedule_jobs,
    retry_job,
    retry_jobs,
    wake_jobs,
)
from queue_engine.ops.kinds import pause_kind, paused_kinds, resume_kind
from queue_engine.ops.queues import (
    pause_queue,
    reset_queue_config,
    resume_queue,
    set_group_limit,
    set_group_weight,
    update_queue_config,
)
from queue_engine.ops.rerun import plan_rerun_from, rerun_flow_from
from queue_engine.ops.schedules import (
    disable_schedule,
    enable_schedule,
    remove_schedule,
    run_schedule_now,
)
from queue_engine.ops.signals import open_gate, send_signal

__all__ = [
    "DeadGroupKey",
    "cancel_flow",
    "cancel_job",
    "cancel_jobs",
    "disable_schedule",
    "enable_schedule",
    "open_gate",
    "pause_kind",
    "pause_queue",
    "paused_kinds",
    "plan_rerun_from",
    "redrive_job",
    "redrive_jobs",
    "redrive_queue",
    "remove_job",
    "remove_jobs",
    "remove_schedule",
    "requeue_flow",
    "rerun_flow",
    "rerun_flow_from",
    "reschedule_jobs",
    "reset_queue_config",
    "resume_kind",
    "resume_queue",
    "retry_job",
    "retry_jobs",
    "run_schedule_now",
    "send_signal",
    "set_group_limit",
    "set_group_weight",
    "update_queue_config",
    "wake_jobs",
]
