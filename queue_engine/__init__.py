"""A Postgres-native job and flow engine for Django."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from queue_engine.definition.decorator import job
    from queue_engine.definition.job import Backoff
    from queue_engine.enqueueing.bulk import enqueue_many
    from queue_engine.enqueueing.prepare import JobSpec
    from queue_engine.enqueueing.single import enqueue
    from queue_engine.exceptions import (
        Cancelled,
        EnqueueError,
        Fatal,
        FilterError,
        FlowError,
        FlowFailed,
        JobFailed,
        LeaseExpired,
        NarrowFilter,
        OutcomeRefused,
        ResultTimeout,
        Retry,
        ScheduleError,
        SignalError,
        SignalTimeout,
        Snooze,
        StepError,
        UnknownIdError,
    )
    from queue_engine.flows import Flow, Node
    from queue_engine.gates import send_flow_signal
    from queue_engine.results import aflow_result, ajob_result, flow_result, job_result
    from queue_engine.waits import send_signal
    from queue_engine.worker.context import JobContext

__version__ = "0.1.0"

# Where each public name lives. The package resolves them lazily, so that
# `import queue_engine` works before Django's apps are ready.
_HOMES = {
    "Backoff": "queue_engine.definition.job",
    "job": "queue_engine.definition.decorator",
    "JobContext": "queue_engine.worker.context",
    "JobSpec": "queue_engine.enqueueing.prepare",
    "enqueue": "queue_engine.enqueueing.single",
    "enqueue_many": "queue_engine.enqueueing.bulk",
    "send_signal": "queue_engine.waits",
    "send_flow_signal": "queue_engine.gates",
    "Cancelled": "queue_engine.exceptions",
    "EnqueueError": "queue_engine.exceptions",
    "Fatal": "queue_engine.exceptions",
    "FilterError": "queue_engine.exceptions",
    "FlowError": "queue_engine.exceptions",
    "FlowFailed": "queue_engine.exceptions",
    "JobFailed": "queue_engine.exceptions",
    "ResultTimeout": "queue_engine.exceptions",
    "UnknownIdError": "queue_engine.exceptions",
    "job_result": "queue_engine.results",
    "ajob_result": "queue_engine.results",
    "flow_result": "queue_engine.results",
    "aflow_result": "queue_engine.results",
    "Flow": "queue_engine.flows",
    "Node": "queue_engine.flows",
    "NarrowFilter": "queue_engine.exceptions",
    "OutcomeRefused": "queue_engine.exceptions",
    "LeaseExpired": "queue_engine.exceptions",
    "Retry": "queue_engine.exceptions",
    "ScheduleError": "queue_engine.exceptions",
    "SignalError": "queue_engine.exceptions",
    "SignalTimeout": "queue_engine.exceptions",
    "Snooze": "queue_engine.exceptions",
    "StepError": "queue_engine.exceptions",
}

__all__ = [
    "Backoff",
    "Cancelled",
    "EnqueueError",
    "Fatal",
    "FilterError",
    "Flow",
    "FlowError",
    "FlowFailed",
    "JobContext",
    "JobFailed",
    "JobSpec",
    "LeaseExpired",
    "NarrowFilter",
    "Node",
    "OutcomeRefused",
    "ResultTimeout",
    "Retry",
    "ScheduleError",
    "SignalError",
    "SignalTimeout",
    "Snooze",
    "StepError",
    "UnknownIdError",
    "aflow_result",
    "ajob_result",
    "enqueue",
    "enqueue_many",
    "flow_result",
    "job",
    "job_result",
    "send_flow_signal",
    "send_signal",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'queue_engine' has no attribute {name!r}")
    return getattr(import_module(home), name)
