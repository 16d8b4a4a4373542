"""One job: payload, result, attempts, timings, progress, the log tail, actions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from queue_engine import reads
from queue_engine.console import actions
from queue_engine.console.access import viewer_required
from queue_engine.console.views.params import int_param
from queue_engine.models import Job, JobLog, JobRecord

DETAIL_ORDER: tuple[actions.Action, ...] = ("retry", "redrive", "cancel", "remove")


def available_actions(state: str) -> list[actions.Action]:
    """The actions that apply to a job in this state; a dead job offers redrive, not retry too."""
    found = [a for a in DETAIL_ORDER if state in actions.EFFECTS[a]]
    if "redrive" in found:
        found.remove("retry")
    return found


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
        # A running job asked to stop already has nothing left to offer: it is ending.
        "job_actions": []
        if job.state == "running" and "cancel_requested" in (job.meta or {})
        else available_actions(job.state),
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
        "errors": list(reversed(job.errors or [])),
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


@viewer_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = reads.find_job(job_id)
    if job is None:
        raise Http404(f"Job {job_id} does not exist (it may have been removed or pruned).")
    around = int_param(request.GET, "around")
    context = detail_context(job, around)
    return render(request, "queue_engine/job.html", {"page": "jobs", **context})
