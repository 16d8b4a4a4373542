"""Signals from the console: send one to a parked job ("Approve", or a name and a JSON
payload), wake a sleeping job now or at another time, open a flow's gate; each behind a
confirmation."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone

from queue_engine import ops, reads
from queue_engine.console.access import operator_required
from queue_engine.console.pages.job import LOCAL_INPUT
from queue_engine.exceptions import OpsError
from queue_engine.gates import live_gates
from queue_engine.models import Job


def read_payload(text: str) -> tuple[Any, str | None]:
    """The JSON payload typed in the form (empty means null), or why it cannot be read."""
    if not text.strip():
        return None, None
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, (
            f"The payload is not valid JSON ({exc.msg} at line {exc.lineno}, column "
            f'{exc.colno}); write an object such as {{"approved": true}}, or leave it empty.'
        )


def confirm(request: HttpRequest, status: int = 200, **context: Any) -> HttpResponse:
    return render(request, "queue_engine/confirm_signal.html", context, status=status)


@operator_required
def job_signal(request: HttpRequest, job_id: int) -> HttpResponse:
    back = reverse("queue_engine:job", args=[job_id])
    job = Job.objects.filter(pk=job_id).first()
    if job is None:
        messages.error(request, f"Job {job_id} has ended or does not exist: no signal was sent.")
        return redirect(back)
    name = request.POST.get("name", "").strip()
    text = request.POST.get("payload", "")
    payload, problem = read_payload(text)
    if not name or len(name) > 200:
        problem = "A signal needs a name of 1 to 200 characters; type the name the job waits for."
    base: dict[str, Any] = {
        "page": "jobs",
        "job": job,
        "back": back,
        "name": name,
        "payload_text": text,
    }
    if problem is not None:
        return confirm(request, status=400, kind="signal", problem=problem, **base)
    if request.POST.get("confirm") != "yes":
        waits_for = (
            (job.meta or {}).get("parked", {}).get("signal") if job.state == "parked" else None
        )
        return confirm(request, kind="signal", payload=payload, resumes=waits_for == name, **base)
    try:
        ops.send_signal(job_id, name, payload, actor=request.user)
    except OpsError as exc:
        messages.error(request, str(exc))
        return redirect(back)
    messages.success(request, f"Signal {name} sent to job #{job_id}.")
    return redirect(back)


def parked(request: HttpRequest, job_id: int, otherwise: str) -> Job | None:
    """The parked job, or None with a message saying it is not parked and so `otherwise`."""
    job = Job.objects.filter(pk=job_id, state="parked").first()
    if job is None:
        messages.error(request, f"Job {job_id} is not parked: {otherwise}.")
    return job


@operator_required
def job_wake(request: HttpRequest, job_id: int) -> HttpResponse:
    back = reverse("queue_engine:job", args=[job_id])
    job = parked(request, job_id, "there is nothing to wake")
    if job is None:
        return redirect(back)
    if request.POST.get("confirm") != "yes":
        return confirm(request, kind="wake", page="jobs", job=job, back=back)
    if ops.wake_jobs([job_id], actor=request.user) == 0:
        messages.error(request, f"Job {job_id} is no longer parked: nothing was woken.")
    else:
        messages.success(request, f"Job #{job_id} woken: it runs again now.")
    return redirect(back)


# What a datetime-local input sends and shows (seconds optional).
def read_wake_time(text: str) -> tuple[datetime | None, str | None]:
    """The time typed in the form, in the console's time zone, or why it cannot be read."""
    for pattern in (LOCAL_INPUT, "%Y-%m-%dT%H:%M"):
        try:
            naive = datetime.strptime(text.strip(), pattern)
        except ValueError:
            continue
        return timezone.make_aware(naive), None
    zone = timezone.get_current_timezone_name()
    return None, (
        f"{text.strip()[:40]!r} is not a date and time: give one as 2026-12-24T09:00 "
        f"(in {zone}), or pick it in the field."
    )


@operator_required
def job_reschedule(request: HttpRequest, job_id: int) -> HttpResponse:
    back = reverse("queue_engine:job", args=[job_id])
    job = parked(request, job_id, "there is no wait to move")
    if job is None:
        return redirect(back)
    text = request.POST.get("when", "")
    when, problem = read_wake_time(text)
    if when is None:
        messages.error(request, f"{problem} Nothing was changed.")
        return redirect(back)
    if request.POST.get("confirm") != "yes":
        return confirm(
            request,
            kind="reschedule",
            page="jobs",
            job=job,
            back=back,
            when=when,
            when_text=text,
            ends_now=when <= timezone.now(),
        )
    if ops.reschedule_jobs([job_id], when, actor=request.user) == 0:
        messages.error(request, f"Job {job_id} is no longer parked: nothing was changed.")
    elif when <= timezone.now():
        messages.success(request, f"Job #{job_id}: its wait has ended; it runs again now.")
    else:
        stamp = timezone.localtime(when).strftime("%Y-%m-%d %H:%M:%S %Z")
        messages.success(request, f"Job #{job_id} now wakes at {stamp}.")
    return redirect(back)


@operator_required
def flow_gate(request: HttpRequest, flow_id: int) -> HttpResponse:
    back = reverse("queue_engine:flow", args=[flow_id])
    flow = reads.flow_graph(flow_id, max_nodes=1)
    if flow is None:
        raise Http404(f"Flow {flow_id} does not exist.")
    name = request.POST.get("name", "")
    waiting = sorted(live_gates(flow_id, name))
    if not waiting:
        messages.error(
            request, f"No gate of flow {flow_id} waits for the signal {name!r}: nothing was sent."
        )
        return redirect(back)
    if request.POST.get("confirm") != "yes":
        return confirm(
            request, kind="gate", page="flows", flow=flow.flow, name=name, gates=waiting, back=back
        )
    try:
        opened = ops.open_gate(flow_id, name, {}, actor=request.user)
    except OpsError as exc:
        messages.error(request, str(exc))
        return redirect(back)
    s = "" if len(opened) == 1 else "s"
    messages.success(request, f"Flow #{flow_id}: {len(opened)} gate{s} opened by signal {name}.")
    return redirect(back)
