"""One queue: depth by state, dead letter, configuration, pause/resume, redrive all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from queue_engine import ops, reads
from queue_engine.console import charts, job_filters
from queue_engine.console.access import operator_required, viewer_required
from queue_engine.console.pages.queues import (
    keys_context,
    queue_context,
    queues_context,
)
from queue_engine.console.queue_form import config_rows
from queue_engine.exceptions import OpsError
from queue_engine.models import GroupLimit, GroupWeight
from queue_engine.ops import queues as ops_queues


@viewer_required
def queues(request: HttpRequest) -> HttpResponse:
    return render(request, "queue_engine/queues.html", queues_context(request))


@viewer_required
def queue(request: HttpRequest, name: str) -> HttpResponse:
    context = queue_context(name)
    recent = job_filters.job_page(job_filters.JobFilters(queue=name), limit=10)
    window = request.GET.get("window", "1h")
    if window not in charts.WINDOWS:
        window = "1h"
    throughput_chart, latency_chart = charts.queue_charts(name, window)
    return render(
        request,
        "queue_engine/queue.html",
        {
            "page": "queues",
            **context,
            **keys_context(name),
            "window": window,
            "windows": list(charts.WINDOWS),
            "throughput_chart": throughput_chart,
            "latency_chart": latency_chart,
            "group_limits": GroupLimit.objects.filter(queue=name).order_by("group_key"),
            "group_weights": GroupWeight.objects.filter(queue=name).order_by("group_key"),
            "recent": recent.jobs,
            "rows": config_rows(name, context["config"]),
        },
    )


@operator_required
def redrive(request: HttpRequest, name: str) -> HttpResponse:
    back = reverse("queue_engine:queue", args=[name])
    if request.POST.get("confirm") != "yes":
        try:
            with reads.time_limited():
                count = reads.exact_dead_count(name)
        except reads.NarrowFilter as exc:
            messages.error(request, str(exc))
            return redirect(back)
        return render(
            request,
            "queue_engine/confirm_queue.html",
            {
                "page": "queues",
                "name": name,
                "count": count,
                "back": back,
            },
        )
    done = ops.redrive_queue(name, actor=request.user)
    noun = "job" if done == 1 else "jobs"
    messages.success(request, f"{done} dead {noun} of {name} redriven.")
    return redirect(back)


@operator_required
def pause(request: HttpRequest, name: str) -> HttpResponse:
    return _toggle(
        request, name, "pause", ops_queues.pause_queue, "paused: workers take no new jobs from it"
    )


@operator_required
def resume(request: HttpRequest, name: str) -> HttpResponse:
    return _toggle(request, name, "resume", ops_queues.resume_queue, "resumed")


def _toggle(
    request: HttpRequest, name: str, verb: str, action: Callable[..., Any], done: str
) -> HttpResponse:
    """As a kind's pause and resume: a confirmation that says what changes, then the change."""
    back = reverse("queue_engine:queue", args=[name])
    if request.POST.get("confirm") != "yes":
        context = queue_context(name)
        return render(
            request,
            "queue_engine/confirm_queue_pause.html",
            {"page": "queues", "action": verb, "back": back, **context},
        )
    try:
        action(name, actor=request.user)
    except OpsError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Queue {name} {done}.")
    return redirect(back)
