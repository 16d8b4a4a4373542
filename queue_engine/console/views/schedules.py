"""Recurring jobs: their timing, next and last fire; enable, disable, run now."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from queue_engine import ops
from queue_engine.console.access import operator_required, viewer_required
from queue_engine.console.pages.schedules import schedules_context
from queue_engine.exceptions import ScheduleError

ACTIONS: dict[str, tuple[Callable[..., Any], str]] = {
    "enable": (ops.enable_schedule, "enabled: it fires again from its next time"),
    "disable": (ops.disable_schedule, "disabled: it will not fire until enabled"),
    "run_now": (ops.run_schedule_now, "enqueued now"),
}


@viewer_required
def schedules(request: HttpRequest) -> HttpResponse:
    return render(request, "queue_engine/schedules.html", schedules_context(request))


@operator_required
def schedule_action(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "")
    action = ACTIONS.get(request.POST.get("action", ""))
    if action is None:
        messages.error(request, "Unknown schedule action: use the buttons on this page.")
        return redirect("queue_engine:schedules")
    run, done = action
    try:
        result = run(name, actor=request.user)
    except ScheduleError as exc:
        messages.error(request, str(exc))
    else:
        if request.POST.get("action") == "run_now":
            messages.success(request, f"Schedule {name}: job #{result.id} {done}.")
        else:
            messages.success(request, f"Schedule {name} {done}.")
    return redirect("queue_engine:schedules")
