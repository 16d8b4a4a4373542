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

# For each action: what happens to the jobs of each state it accepts, said of one job
# and of several ("1 running job will be told to stop; whatever it returns is
# discarded"), and why it skips the others.
type Wording = tuple[str, str]  # (one, many)

DELETED: Wording = ("be deleted for good", "be deleted for good")
FRESH_ATTEMPTS: Wording = (
    "go back to its queue with fresh attempts",
    "go back to their queue with fresh attempts",
)
EFFECTS: dict[Action, dict[str, Wording]] = {
    "cancel": {
        "available": ("stop waiting and move to history as cancelled",) * 2,
        "scheduled": ("stop waiting and move to history as cancelled",) * 2,
        "blocked": (
            "stop awaiting its parents and move to history as cancelled",
            "stop awaiting their parents and move to history as cancelled",
        ),
        "upstream_failed": (
            "move to history as cancelled (it can no longer run)",
            "move to history as cancelled (they can no longer run)",
        ),
        "parked": (
            "stop waiting for its signal or time and move to history as cancelled",
            "stop waiting for their signals or times and move to history as cancelled",
        ),
        "running": (
            "be told to stop; whatever it returns is discarded",
            "be told to stop; whatever they return is discarded",
        ),
    },
    "retry": {
        "available": ("run now",) * 2,
        "scheduled": (
            "run now instead of at its scheduled time",
            "run now instead of at their scheduled time",
        ),
        "failed": FRESH_ATTEMPTS,
        "cancelled": FRESH_ATTEMPTS,
        "succeeded": ("run again with fresh attempts",) * 2,
    },
    "remove": {
        state: DELETED
        for state in (
            "available",
            "scheduled",
            "parked",
            "blocked",
            "upstream_failed",
            "succeeded",
            "failed",
            "cancelled",
        )
    },
    "redrive": {"failed": FRESH_ATTEMPTS, "cancelled": FRESH_ATTEMPTS},
}
SKIPPED_BECAUSE: dict[Action, Wording] = {
    "cancel": ("it has already ended", "they have already ended"),
    "retry": (
        "it is running or blocked, awaiting its parents",
        "they are running or blocked, awaiting their parents",
    ),
    "remove": ("it is running (cancel it first)", "they are running (cancel them first)"),
    "redrive": ("it is not dead or cancelled", "they are not dead or cancelled"),
}
# ops.retry_jobs leaves these out: their dependants counted them when they succeeded.
SUCCEEDED_FLOW_NODES: Wording = (
    "it succeeded as a flow node, which runs again only with its flow",
    "they succeeded as flow nodes, which run again only with their flow",
)
# ops.cancel_jobs leaves these out: they were told to stop already.
ALREADY_STOPPING: Wording = (
    "it is running and was already asked to stop",
    "they are running and were already asked to stop",
)
GONE: Wording = ("it no longer exists", "they no longer exist")


def said(n: int, wording: Wording) -> str:
    """The wording for n jobs: its first form for one, its second for any other count."""
    return wording[0] if n == 1 else wording[1]


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
    with_steps: int = 0  # jobs going back to their queue that recorded durable steps

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def verb(self) -> str:
        """A retry of succeeded jobs only runs them again: nothing failed to retry."""
        if (
            self.action == "retry"
            and self.changes
            and {c[1] for c in self.changes} == {"succeeded"}
        ):
            return "Run again"
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
            result.skipped.append((len(left_out), said(len(left_out), SUCCEEDED_FLOW_NODES)))
    elif action == "cancel":
        left_out = reads.stopping_jobs([i for i, s in states.items() if s == "running"])
        if left_out:
            result.skipped.append((len(left_out), said(len(left_out), ALREADY_STOPPING)))
    for job_id in ids:
        state = states.get(job_id)
        if job_id in left_out:
            continue
        if state in effects:
            result.ids.append(job_id)
            by_state[state] += 1
        elif state is not None:
            skipped += 1
    result.changes = [(n, state, said(n, effects[state])) for state, n in sorted(by_state.items())]
    if skipped:
        result.skipped.append((skipped, said(skipped, SKIPPED_BECAUSE[action])))
    missing = len(ids) - len(states)
    if missing:
        result.skipped.append((missing, said(missing, GONE)))
    if action in STEP_ACTIONS:
        ended = [i for i in result.ids if states.get(i) in ("failed", "cancelled", "succeeded")]
        result.with_steps = reads.jobs_with_steps(ended)
    return result


# The actions that put ended jobs back in their queue: those jobs keep their recorded
# steps unless the operator asks to clear them.
STEP_ACTIONS: tuple[Action, ...] = ("retry", "redrive")


def execute(action: Action, ids: list[int], actor: Any, *, clear_steps: bool = False) -> int:
    if not ids:
        return 0
    if action in STEP_ACTIONS:
        return RUN[action](ids, actor=actor, clear_steps=clear_steps)
    return RUN[action](ids, actor=actor)


def outcome_message(action: Action, confirmed: int, done: int) -> str:
    noun = "job" if done == 1 else "jobs"
    message = f"{done} {noun} {DONE[action]}."
    if done < confirmed:
        message += (
            f" {confirmed - done} of the {confirmed} you confirmed "
            f"{said(confirmed - done, ('had changed state in the meantime and was left as it is', 'had changed state in the meantime and were left as they are'))}."
        )
    return message
