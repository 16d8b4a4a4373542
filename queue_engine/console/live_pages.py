"""The list pages, live: flows, queues, dead letter, schedules, workers, kinds, the
audit log and the metrics.

Each page renders its changing part as a template partial from a context function
that reads only the request's query string; `PageConsumer` renders the same partial
whenever a hint or its timer says something may have changed, and sends it only
when it differs from what the page shows. The page tells the socket its query
string (on connect and after each filter change), so a filtered page stays filtered.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, QueryDict
from django.urls import reverse

from queue_engine.console.consumers import LiveConsumer
from queue_engine.console.pages import (
    audit,
    dead,
    fleet,
    flows,
    kinds,
    queues,
    schedules,
    workers,
)


@dataclass(frozen=True)
class LivePage:
    route: str  # the page's own URL name, for the links its partial builds
    template: str
    parts: tuple[str, ...]  # partials that each carry an id and hx-swap-oob
    context: Callable[[HttpRequest], dict[str, Any]]
    refresh_every: float = 2.0  # claims and heartbeats are not announced
    min_interval: float = 0.5  # a page of many rows is read at most twice a second


PAGES: dict[str, LivePage] = {
    "flows": LivePage(
        "queue_engine:flows", "queue_engine/flows.html", ("flow-results",), flows.flows_context
    ),
    "queues": LivePage(
        "queue_engine:queues", "queue_engine/queues.html", ("queue-rows",), queues.queues_context
    ),
    # The grouping scans up to DEAD_SCAN rows: once a second is enough.
    "dead": LivePage(
        "queue_engine:dead",
        "queue_engine/dead.html",
        ("dead-groups",),
        dead.dead_context,
        min_interval=1.0,
    ),
    "schedules": LivePage(
        "queue_engine:schedules",
        "queue_engine/schedules.html",
        ("schedule-rows",),
        schedules.schedules_context,
        refresh_every=5.0,
    ),
    "workers": LivePage(
        "queue_engine:workers",
        "queue_engine/workers.html",
        ("worker-rows",),
        workers.workers_context,
    ),
    "kinds": LivePage(
        "queue_engine:kinds", "queue_engine/kinds.html", ("kind-rows",), kinds.kinds_context
    ),
    "audit": LivePage(
        "queue_engine:audit", "queue_engine/audit.html", ("audit-events",), audit.audit_context
    ),
    # Minute buckets close once a minute; the live tail moves with every job that ends.
    "metrics": LivePage(
        "queue_engine:fleet",
        "queue_engine/fleet.html",
        ("metrics-body",),
        fleet.fleet_context,
        refresh_every=5.0,
        min_interval=2.0,
    ),
}

# A relative time's text changes every second; only its datetime says whether it moved.
TIME_TEXT = re.compile(r"(<time [^>]*>)[^<]*(</time>)")


class PageConsumer(LiveConsumer):
    """One list page, re-rendered on hints and on a timer; nothing is sent that the page
    already shows, and nothing is read while the page is hidden."""

    async def setup(self) -> bool:
        page = PAGES.get(self.scope["url_route"]["kwargs"]["page"])
        if page is None:
            return False
        self.page = page
        self.refresh_every = page.refresh_every
        self.min_interval = page.min_interval
        return True

    async def handle(self, message: dict[str, Any]) -> None:
        if isinstance(message.get("query"), str):
            self.shows(QueryDict(message["query"][:2000]))
            return
        await super().handle(message)

    def render(self, dirty: set[str]) -> str:
        if self.query is None:  # the page has not said what it shows yet
            return ""
        request = self.page_request(reverse(self.page.route), self.query)
        context = self.page.context(request)
        html = self.fragments(self.page.template, self.page.parts, context, request)
        return self.only_news(html, seen_as=TIME_TEXT.sub(r"\1\2", html))
