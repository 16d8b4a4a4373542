"""What the job page shows: its state, detail, log tail, steps and outcome, the actions
that apply, its mailbox and wake-time form; read by the view and by its socket."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from queue_engine import reads
from queue_engine.console import actions
from queue_engine.models import Job, JobLog, JobRecord, JobSignal

DETAIL_ORDER: tuple[actions.Action, ...] = ("retry", "redrive", "cancel", "remove")


def available_actions(job: Job | JobRecord) -> list[tuple[actions.Action, str]]:
    """The actions that apply to this job, with their buttons' words: a dead job offers
    redrive, not retry too; a succeeded one "Run again", unless it succeeded as a flow
    node, which runs again only with its flow."""
    state = job.state
    found = [a for a in DETAIL_ORDER if state in actions.EFFECTS[a]]
    if "redrive" in found:
        found.remove("retry")
    if state == "succeeded" and job.flow_id is not None:
        found.remove("retry")
    again = state == "succeeded"
    return [(a, "Run again" if again and a == "retry" else a.capitalize()) for a in found]


def run_starts(job: Job | JobRecord) -> list[int]:
    """How many errors the job held as each of its later runs began (a redrive, a flow's
    requeue, a run again), as the move back to the live table records them."""
    starts = (job.meta or {}).get("run_starts")
    return [s for s in starts if isinstance(s, int)] if isinstance(starts, list) else []


def run_cause(job: Job | JobRecord) -> str:
    """What began the job's later runs: a redrive (or a retry of an ended job), a requeue
    of its flow, or both; the counters say which, not which run each began."""
    meta = job.meta or {}
    if "requeued" not in meta:
        return "a redrive"
    return "a requeue of its flow" if "redriven" not in meta else "a redrive or a requeue"


def numbered_errors(job: Job | JobRecord) -> list[dict[str, Any]]:
    """The job's errors, newest first, each with the run it happened in (from 1)."""
    starts = run_starts(job)
    errors = [
        {**error, "run": 1 + sum(1 for start in starts if start <= index)}
        for index, error in enumerate(job.errors or [])
        if isinstance(error, dict)
    ]
    return list(reversed(errors))


def timings(job: Job | JobRecord) -> dict[str, timedelta | None]:
    finished = getattr(job, "finished_at", None)
    started = job.started_at
    waited = started - job.run_at if started and started >= job.run_at else None
    if job.state == "running" and started:
        ran: timedelta | None = timezone.now() - started
    else:
        ran = finished - started if finished and started else None
    total = (finished or timezone.now()) - job.created_at
    return {"waited": waited, "ran": ran, "total": total}


def state_context(job: Job | JobRecord) -> dict[str, Any]:
    """What the live header shows: state, attempt, progress, timings, actions."""
    return {
        "job": job,
        "ended": isinstance(job, JobRecord),
        "timings": timings(job),
        "mailbox": [] if isinstance(job, JobRecord) else mailbox(job.pk),
        **wake_form(job),
        "run": len(run_starts(job)) + 1,
        # A running job asked to stop already has nothing left to offer: it is ending.
        "job_actions": []
        if job.state == "running" and "cancel_requested" in (job.meta or {})
        else available_actions(job),
    }


def log_context(
    lines: list[JobLog], cut: bool = False, more_after: bool = False, around: int | None = None
) -> dict[str, Any]:
    return {
        "log_lines": lines,
        "log_cut": cut,
        "log_more_after": more_after,  # newer lines exist: the live tail does not append
        "log_around": around,
        "last_log_id": lines[-1].id if lines else 0,
    }


def steps_context(job: Job | JobRecord) -> dict[str, Any]:
    """The durable steps (`ctx.step`) the job recorded, with how long each took."""
    steps, total = reads.job_steps(job.pk)
    return {
        "job": job,
        "steps": [(step, step.finished_at - step.started_at) for step in steps],
        "steps_total": total,
    }


def outcome_context(job: Job | JobRecord) -> dict[str, Any]:
    """Result and the errors of every failed attempt, newest first."""
    return {
        "job": job,
        "ended": isinstance(job, JobRecord),
        "errors": numbered_errors(job),
        "runs": len(run_starts(job)) + 1,
        "run_cause": run_cause(job),
        "has_result": isinstance(job, JobRecord) and job.result is not None,
    }


def detail_context(job: Job | JobRecord, around: int | None = None) -> dict[str, Any]:
    """Everything the job page shows; `around` a log line's id shows the lines around it
    instead of the tail (a link to a line)."""
    if around is None:
        log = log_context(*reads.log_tail(job.pk))
    else:
        lines, cut, more_after = reads.log_around(job.pk, around)
        log = log_context(lines, cut, more_after, around)
    links = reads.flow_links(job.pk) if job.flow_id is not None else None
    return {
        **state_context(job),
        **outcome_context(job),
        **steps_context(job),
        **log,
        "links": links,
    }


MAILBOX_SHOWN = 50


def mailbox(job_id: int) -> list[JobSignal]:
    """The signals sent to the job that no wait has taken yet, oldest first."""
    return list(JobSignal.objects.filter(job_id=job_id).order_by("id")[:MAILBOX_SHOWN])


LOCAL_INPUT = "%Y-%m-%dT%H:%M:%S"


def wake_form(job: Job | JobRecord) -> dict[str, Any]:
    """The "Change the wake time" form of a parked job: the console's time zone, the
    wait's deadline in it as the input's value (empty when it waits with none), and
    `wait_version`, which names this wait as it stands.

    The wait's forms keep what the operator typed while the live header is swapped in
    again (hx-preserve keeps an element whose id the new header has too). Their ids
    carry `wait_version`, so a wait that changed meanwhile (another operator moved its
    wake time, the job parked again) replaces them with forms showing the new values."""
    wait = (job.meta or {}).get("parked", {}) if job.state == "parked" else {}
    until = wait.get("until")
    value = ""
    if until:
        value = timezone.localtime(datetime.fromisoformat(until)).strftime(LOCAL_INPUT)
    seen = json.dumps([wait.get("since"), until, wait.get("signal")])
    return {
        "time_zone": timezone.get_current_timezone_name(),
        "wake_at_value": value,
        "wait_version": hashlib.blake2s(seen.encode(), digest_size=6).hexdigest(),
    }
