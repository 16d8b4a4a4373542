"""What the queue pages show: the list of queues (sortable), one queue's depth by state,
configuration and limits, and its group keys' panel."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.http import Http404, HttpRequest

from queue_engine import reads
from queue_engine.console import charts
from queue_engine.models import QueueConfig
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
