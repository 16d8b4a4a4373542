"""Bulk actions on selected jobs: what each would change (for the confirmation), then doing it.

A plan is computed from the jobs' current states when the operator asks, shown
as a confirmation that says exactly how many jobs change and how; only the
jobs counted there are sent to `ops` when they confirm. Whatever changed in
between is fenced by `ops` itself, and the result message says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from queue_engine import ops, reads

Action = Literal["cancel", "retry", "remove", "redrive"]
ACTIONS: tuple[Action, ...] = ("cancel", "retry", "remove", "redrive")
MAX_SELECTION = 1000

# For each action: what happens to a job in each state it accepts, and why it
# skips the others.
EFFECTS: dict[Action, dict[str, str]] = {
    "cancel": {
        "available": "stop waiting and move to history as cancelled",
        "scheduled": "stop waiting and move to history as cancelled",
        "blocked": "stop waiting for their flow and move to history as cancelled",
        "running": "are told to stop; whatever they return is discarded",
    },
    "retry": {
        "available": "run now",
        "scheduled": "run now instead of at their scheduled time",
        "failed": "go back to their queue with fresh attempts",
        "cancelled": "go back to their queue with fresh attempts",
        "succeeded": "run again with fresh attempts",
    },
    "remove": {
        "available": "are deleted for good",
        "scheduled": "are deleted for good",
        "blocked": "are deleted for good",
        "succeeded": "are deleted for good",
        "failed": "are deleted for good",
        "cancelled": "are deleted for good",
    },
    "redrive": {
        "failed": "go back to their queue with fresh attempts",
        "cancelled": "go back to their queue with fresh attempts",
    },
}
SKIPPED_BECAUSE: dict[Action, str] = {
    "cancel": "already ended",
    "retry": "running or waiting for their flow",
    "remove": "running (cancel them first)",
    "redrive": "not dead or cancelled",
}
# ops.retry_jobs leaves these out: their dependants counted them when they succeeded.
SUCCEEDED_FLOW_NODES = "succeeded as flow nodes, which run again only with their flow"
# ops.cancel_jobs leaves these out: they were told to stop already.
ALREADY_STOPPING = "running and already asked to stop"

VERBS: dict[Action, str] = {
    "cancel": "Cancel",
    "retry": "Retry",
    "remove": "Remove",
    "redrive": "Redrive",
}
DONE: dict[Action, str] = {
    "cancel": "cancelled",
    "retry": "retried",
    "remove": "removed",
    "redrive": "redriven",
}
RUN: dict[Action, Callable[..., int]] = {
    "cancel": ops.cancel_jobs,
    "retry": ops.retry_jobs,
    "remove": ops.remove_jobs,
    "redrive": ops.redrive_jobs,
}


@dataclass
class Plan:
    action: Action
    ids: list[int] = field(default_factory=list)
    changes: list[tuple[int, str, str]] = field(default_factory=list)  # count, state, effect
    skipped: list[tuple[int, str]] = field(default_factory=list)  # count, reason

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def verb(self) -> str:
        return VERBS[self.action]

    @property
    def dangerous(self) -> bool:
        return self.action in ("cancel", "remove")


def parse_ids(values: list[str]) -> list[int]:
    ids = sorted({int(v) for v in values if v.strip().isdigit() and len(v.strip()) < 19})
    return ids[:MAX_SELECTION]


def plan(action: Action, ids: list[int]) -> Plan:
    states = reads.job_states(ids)
    effects = EFFECTS[action]
    result = Plan(action)
    by_state: Counter[str] = Counter()
    skipped = 0
    left_out: set[int] = set()  # accepted by state, left out by ops all the same
    if action == "retry":
        left_out = reads.succeeded_flow_nodes([i for i, s in states.items() if s == "succeeded"])
        if left_out:
            result.skipped.append((len(left_out), SUCCEEDED_FLOW_NODES))
    elif action == "cancel":
        left_out = reads.stopping_jobs([i for i, s in states.items() if s == "running"])
        if left_out:
            result.skipped.append((len(left_out), ALREADY_STOPPING))
    for job_id in ids:
        state = states.get(job_id)
        if job_id in left_out:
            continue
        if state in effects:
            result.ids.append(job_id)
            by_state[state] += 1
        elif state is not None:
            skipped += 1
    result.changes = [(n, state, effects[state]) for state, n in sorted(by_state.items())]
    if skipped:
        result.skipped.append((skipped, SKIPPED_BECAUSE[action]))
    missing = len(ids) - len(states)
    if missing:
        result.skipped.append((missing, "no longer exist"))
    return result


def execute(action: Action, ids: list[int], actor: Any) -> int:
    if not ids:
        return 0
    return RUN[action](ids, actor=actor)


def outcome_message(action: Action, confirmed: int, done: int) -> str:
    noun = "job" if done == 1 else "jobs"
    message = f"{done} {noun} {DONE[action]}."
    if done < confirmed:
        message += (
            f" {confirmed - done} of the {confirmed} you confirmed had changed state "
            "in the meantime and were left as they are."
        )
    return message
