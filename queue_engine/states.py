"""The names of job, history and flow states: one definition for the models, the reads and
the console.

A live job (queue_engine_job) is available, scheduled, running, parked (its handler
waits for a signal or a time: `ctx.wait_for_signal`, `ctx.sleep_until`), blocked (a flow node
waiting for its parents) or upstream_failed (a flow node that can no longer run: an
ancestor is dead or cancelled; a requeue of its flow brings it back); an ended one (queue_engine_jobrecord) succeeded, failed (the
dead letter) or was cancelled. A flow runs until it succeeds, fails or is cancelled.
"""

from __future__ import annotations

from typing import Literal

from django.db import models


class JobState(models.TextChoices):
    AVAILABLE = "available"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    PARKED = "parked"
    BLOCKED = "blocked"
    UPSTREAM_FAILED = "upstream_failed"


class RecordState(models.TextChoices):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class FlowState(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


LiveState = Literal["available", "scheduled", "running", "parked", "blocked", "upstream_failed"]
EndedState = Literal["succeeded", "failed", "cancelled"]
State = LiveState | EndedState
FlowStateName = Literal["running", "succeeded", "failed", "cancelled"]

LIVE_STATES: tuple[LiveState, ...] = (
    "available",
    "scheduled",
    "running",
    "parked",
    "blocked",
    "upstream_failed",
)
ENDED_STATES: tuple[EndedState, ...] = ("succeeded", "failed", "cancelled")
STATES: tuple[State, ...] = LIVE_STATES + ENDED_STATES
FLOW_STATES: tuple[FlowStateName, ...] = ("running", "succeeded", "failed", "cancelled")


# The words the console shows for states, where they differ from the stored names: a dead
# job, as Sidekiq says (Oban and River say discarded). A blocked job stays blocked: it waits
# for its parents in a flow, and "waiting" means ready to run everywhere else.
STATE_WORDS: dict[str, str] = {"failed": "dead", "upstream_failed": "upstream failed"}
