"""One queue: depth by state, dead letter, configuration, pause/resume, redrive all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from queue_engine import ops, reads
from queue_engine.console import charts, job_filters
from queue_engine.console.access import operator_required, viewer_required
from queue_engine.console.queue_form import config_rows
from queue_engine.exceptions import OpsError
from queue_engine.models import GroupLimit, GroupWeight, QueueConfig
from queue_engine.ops import queues as ops_queues
from queue_engine.templatetags.queue_engine import duration


@dataclass(frozen=True)
class QueueRow:
    """One line of the queues page: live depth, the last hour's throughput, limits."""

    stats: reads.QueueStats
    trend: charts.Trend | None
    config: QueueConfig | None

    @property
    def name(self) -> str:
        return self.stats.name

    @property
    def state(self) -> str:
        """paused; working (something runs); waiting (jobs wait, none runs); idle."""
        if self.stats.paused:
            return "paused"
        if self.stats.running:
            return "working"
        if self.stats.available:
            return "waiting"
        return "idle"

    @property
    def depth(self) -> int:
        return self.stats.available + self.stats.scheduled + self.stats.running

    @property
    def done_last_hour(self) -> int:
        return self.trend.ended if self.trend else 0

    @property
    def per_minute(self) -> float:
        return self.done_last_hour / 60

    @property
    def limits(self) -> list[str]:
        config = self.config
        if config is None:
            return []
        said = []
        if config.max_concurrency is not None:
            said.append(f"{config.max_concurrency} at a time")
        if config.rate_limit is not None:
            per_key = " per key" if config.rate_limit_per_key else ""
            said.append(f"{config.rate_limit} per {duration(config.rate_window)}{per_key}")
        if config.group_concurrency is not None:
            said.append(f"{config.group_concurrency} per group")
        return said


# sort key: (what orders it, its first direction); numbers start with the largest
QUEUE_SORTS: dict[str, tuple[Callable[[QueueRow], Any], bool]] = {
    "name": (lambda row: row.name, False),
    "state": (lambda row: row.state, False),
    "depth": (lambda row: row.depth, True),
    "available": (lambda row: row.stats.available, True),
    "running": (lambda row: row.stats.running, True),
    "dead": (lambda row: row.stats.dead, True),
    "waiting": (lambda row: row.stats.latency or timedelta(0), True),
    "throughput": (lambda row: row.done_last_hour, True),
}


def queues_context(request: HttpRequest) -> dict[str, Any]:
    stats = reads.queue_stats()
    names = [q.name for q in stats]
    trends = charts.queue_trends(names)
    configs = QueueConfig.objects.in_bulk(names)
    rows = [QueueRow(q, trends.get(q.name), configs.get(q.name)) for q in stats]
    sort = request.GET.get("sort", "name")
    descending = sort.startswith("-")
    key = sort.removeprefix("-")
    if key not in QUEUE_SORTS:
        key, descending = "name", False
    order, _ = QUEUE_SORTS[key]
    rows.sort(key=lambda row: row.name)  # ties stay in name order
    rows.sort(key=order, reverse=descending)
    return {
        "page": "queues",
        "rows": rows,
        "sort": key,
        "descending": descending,
        # each header's link: the other direction for the current column, else its first one
        "sorts": {
            name: ("-" if (not descending if name == key else first_desc) else "") + name
            for name, (_, first_desc) in QUEUE_SORTS.items()
        },
        "paused": sum(1 for row in rows if row.stats.paused),
    }


@viewer_required
def queues(request: HttpRequest) -> HttpResponse:
    return render(request, "queue_engine/queues.html", queues_context(request))


def queue_context(name: str) -> dict[str, Any]:
    stats = reads.queue_stats(name)
    config = QueueConfig.objects.filter(name=name).first()
    if not stats and config is None:
        raise Http404(f"There is no queue named {name!r}.")
    return {
        "queue": stats[0] if stats else reads.QueueStats(name),
        "config": config,
    }


def keys_context(name: str) -> dict[str, Any]:
    """The queue page's keys panel: its busiest group keys, their shares and caps."""
    return {"keys": reads.queue_keys(name)}


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
