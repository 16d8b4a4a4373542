"""Websocket consumers that push HTML fragments for htmx to swap out of band.

A hint from the bridge only marks a consumer dirty; at most a few times a
second it re-reads the database and sends the fragments that may have
changed. On connect, on a bridge reconnect and when the tab becomes visible
again it sends everything (the database is the truth, hints get lost). A
slow timer catches what the engine does not announce (a claim, a promotion).

Access is checked on connect, again every `access_every` seconds and on every
message from the page; a socket whose user lost it is closed with a code the
page tells apart from a restart (see `socket_access`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth.context_processors import PermWrapper
from django.http import Http404, HttpRequest, QueryDict
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html

from queue_engine import reads
from queue_engine.console import job_filters, job_tabs, socket_access
from queue_engine.console.bridge import (
    EVERYONE,
    LAYER,
    OVERVIEW,
    bridge,
    console_layer,
    flow_group,
    job_group,
)
from queue_engine.console.charts import Trend
from queue_engine.console.pages.flows import flow_context
from queue_engine.console.pages.job import (
    detail_context,
    log_context,
    outcome_context,
    state_context,
    steps_context,
)
from queue_engine.console.pages.overview import overview_context
from queue_engine.console.pages.queues import keys_context, queue_context
from queue_engine.console.params import int_param
from queue_engine.console.roles import VIEW

FULL = "full"

log = logging.getLogger(__name__)


class LiveConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]
    """Debounced, visibility-aware fragment pushes; subclasses say what to render."""

    channel_layer_alias = LAYER

    min_interval = 0.3  # seconds between two pushes
    refresh_every = 5.0  # seconds between pushes with no hint at all
    access_every = 2.0  # seconds between two checks that the user may still see the console
    query: QueryDict | None = None  # what a list page shows, once it has said (`shows`)
    last_sent = ""  # what `only_news` last let through

    def live_groups(self) -> list[str]:
        return [EVERYONE]

    async def setup(self) -> bool:
        """Read the URL; False closes the socket."""
        return True

    def render(self, dirty: set[str]) -> str:
        raise NotImplementedError

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        console_layer()  # Channels looks the layer up by its alias as the consumer starts
        await super().__call__(scope, receive, send)

    async def connect(self) -> None:
        user = self.scope.get("user")
        # Accepted, then closed with a code: a refused handshake tells the page nothing,
        # and it would try again for ever; with the code it sends its user to sign in.
        if user is None or not user.is_authenticated:
            await self.refuse(socket_access.SIGNED_OUT)
            return
        if not await database_sync_to_async(user.has_perm)(VIEW):
            await self.refuse(socket_access.NOT_A_VIEWER)
            return
        if not await self.setup():
            await self.close()
            return
        self.user_id: int = user.pk
        self.session_key: str | None = self.scope["session"].session_key
        self.allowed = True
        self.visible = True
        self.dirty: set[str] = set()
        self.last_push = 0.0
        self.flusher: asyncio.Task[None] | None = None
        self.render_context = {
            "perms": PermWrapper(user),
            "csrf_token": self.scope.get("cookies", {}).get(settings.CSRF_COOKIE_NAME, ""),
            "oob": True,
        }
        bridge.ensure_started()
        self.joined = self.live_groups()
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        self.request(FULL)
        self.ticker = asyncio.create_task(self.tick())
        self.guard = asyncio.create_task(self.keep_checking_access())

    async def refuse(self, code: int) -> None:
        await self.accept()
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)
        for task in (getattr(self, name, None) for name in ("ticker", "flusher", "guard")):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not await self.still_allowed(fresh=True):
            return
        try:
            message = json.loads(text_data or "")
        except ValueError:
            return
        if isinstance(message, dict):
            await self.handle(message)

    async def handle(self, message: dict[str, Any]) -> None:
        if "visible" in message:
            self.visible = bool(message["visible"])
            if self.visible:
                self.request(FULL)

    async def keep_checking_access(self) -> None:
        while True:
            await asyncio.sleep(self.access_every)
            if not await self.still_allowed(fresh=False):
                return

    async def still_allowed(self, *, fresh: bool) -> bool:
        """False, with the socket closing, once the user may no longer see the console."""
        if not self.allowed:
            return False
        code = await socket_access.access_lost(self.session_key, self.user_id, fresh=fresh)
        if code is not None and self.allowed:
            self.allowed = False
            await self.close(code=code)
        return self.allowed

    async def console_hint(self, event: dict[str, Any]) -> None:
        self.request(str(event.get("kind", "jobs")))

    async def console_resync(self, event: dict[str, Any]) -> None:
        self.request(FULL)

    def request(self, what: str) -> None:
        self.dirty.add(what)
        if self.flusher is None or self.flusher.done():
            self.flusher = asyncio.create_task(self.flush())

    async def flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self.dirty and self.visible and self.allowed:
            wait = self.last_push + self.min_interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            dirty, self.dirty = self.dirty, set()
            self.last_push = loop.time()
            html = await database_sync_to_async(self.render_limited)(dirty)
            if html and self.allowed:
                await self.send(text_data=html)

    def render_limited(self, dirty: set[str]) -> str:
        """`render` under CONSOLE_STATEMENT_TIMEOUT, as a page's queries run: an update
        whose queries run past it is skipped (the next hint or tick tries again)."""
        try:
            with reads.time_limited():
                return self.render(dirty)
        except reads.NarrowFilter:
            log.warning(
                "%s: a live update ran past CONSOLE_STATEMENT_TIMEOUT and was skipped",
                type(self).__name__,
            )
            return ""

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_every)
            if self.visible:
                self.request("tick")

    def fragment(
        self, template: str, context: dict[str, Any], request: HttpRequest | None = None
    ) -> str:
        """A partial, rendered as its page renders it. Pass the page's `request` (see
        `page_request`) when the partial builds links from its query string."""
        return render_to_string(template, {**context, **self.render_context}, request=request)

    def fragments(
        self,
        template: str,
        parts: Iterable[str],
        context: dict[str, Any],
        request: HttpRequest | None = None,
    ) -> str:
        """The page's partials `template#part`, one after the other."""
        return "".join(self.fragment(f"{template}#{part}", context, request) for part in parts)

    def only_news(self, html: str, *, seen_as: str | None = None, full: bool = False) -> str:
        """`html`, or "" when the page shows it already: when what it is `seen_as` (itself
        by default) equals what was last sent. A `full` push is sent whatever it holds."""
        seen = html if seen_as is None else seen_as
        if seen == self.last_sent and not full:
            return ""
        self.last_sent = seen
        return html

    def shows(self, query: QueryDict) -> None:
        """The page swapped in what `query` selects: push all of it that is news."""
        self.query = query
        self.last_sent = ""
        self.request(FULL)

    def page_request(self, path: str, query: QueryDict) -> HttpRequest:
        """A GET of the page this socket serves, for the template tags that read one."""
        request = HttpRequest()
        request.method = "GET"
        request.path = request.path_info = path
        request.GET = query  # type: ignore[assignment]  # an immutable QueryDict, as Django makes
        request.META = {"QUERY_STRING": query.urlencode()}
        request.user = self.scope["user"]
        return request


class OverviewConsumer(LiveConsumer):
    slow_every = 10.0  # seconds between recomputing the sparklines, failures and health
    slow_at = 0.0
    trends: dict[str, Trend] | None = None

    def live_groups(self) -> list[str]:
        return [EVERYONE, OVERVIEW]

    def render(self, dirty: set[str]) -> str:
        now = time.monotonic()
        slow = FULL in dirty or self.trends is None or now - self.slow_at >= self.slow_every
        trends = None if slow else self.trends
        context = overview_context(trends=trends, failures=slow)
        parts = ["summary", "queues"]
        if slow:
            self.slow_at, self.trends = now, context["trends"]
            parts += ["failures", "health"]
        return self.fragments("queue_engine/overview.html", parts, context)


class QueueConsumer(LiveConsumer):
    # Seconds between two reads of the keys panel, which counts every live job of the
    # queue that has a key (a backlog of 200,000 jobs is 200,000 rows): the counts and
    # the badge follow every hint, the keys their own slower beat, and a full render.
    keys_every = 10.0
    keys_at = 0.0

    async def setup(self) -> bool:
        self.queue_name = self.scope["url_route"]["kwargs"]["name"]
        return True

    def live_groups(self) -> list[str]:
        return [EVERYONE, OVERVIEW]

    def render(self, dirty: set[str]) -> str:
        try:
            context = queue_context(self.queue_name)
        except Http404:  # the queue is gone: nothing to update
            return ""
        parts = ["queue-counts", "queue-badge"]
        now = time.monotonic()
        if FULL in dirty or now - self.keys_at >= self.keys_every:
            self.keys_at = now
            context.update(keys_context(self.queue_name))
            parts.append("queue-keys")
        return self.fragments("queue_engine/queue.html", parts, context)


class JobConsumer(LiveConsumer):
    refresh_every = 2.0

    async def setup(self) -> bool:
        self.job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        self.last_log_id = 0
        # ?around=<line id>: the page shows the lines around a linked line; new lines are
        # appended only once that window reaches the end of the log.
        query = QueryDict(self.scope.get("query_string", b"").decode("latin-1"))
        self.around = int_param(query, "around")
        self.appending = True
        return True

    def live_groups(self) -> list[str]:
        return [EVERYONE, job_group(self.job_id)]

    def render(self, dirty: set[str]) -> str:
        job = reads.find_job(self.job_id)
        if job is None:
            return format_html(
                '<section id="job-state" class="panel" hx-swap-oob="true"><h1>Job {} is gone'
                '</h1><p class="muted">It was removed or pruned from the history.</p></section>',
                self.job_id,
            )
        if FULL in dirty:
            context = detail_context(job, self.around)
            self.last_log_id = context["last_log_id"]
            self.appending = not context["log_more_after"]
            return self.fragments(
                "queue_engine/job.html",
                ("job-state", "job-result", "job-steps", "job-errors", "log-lines"),
                context,
            )
        parts = [
            self.fragment("queue_engine/job.html#job-state", state_context(job)),
            self.fragment("queue_engine/job.html#job-steps", steps_context(job)),
        ]
        if "jobs" in dirty:
            context = outcome_context(job)
            parts.append(
                self.fragments("queue_engine/job.html", ("job-result", "job-errors"), context)
            )
        if not self.appending:
            return "".join(parts)
        lines = reads.log_lines_after(self.job_id, self.last_log_id, limit=reads.LOG_TAIL + 1)
        if len(lines) > reads.LOG_TAIL and self.around is None:
            lines, cut = reads.log_tail(self.job_id)
            parts.append(self.fragment("queue_engine/job.html#log-lines", log_context(lines, cut)))
        elif lines:
            if len(lines) > reads.LOG_TAIL:  # keep the linked line on screen: stop here
                lines, self.appending = lines[: reads.LOG_TAIL], False
            parts.append(self.fragment("queue_engine/log_append.html", {"log_lines": lines}))
        if lines:
            self.last_log_id = lines[-1].id
        return "".join(parts)


class FlowConsumer(LiveConsumer):
    """A flow's head, graph data and node table. Claims are not announced, so the
    timer runs every second; a push that would change nothing is not sent."""

    refresh_every = 1.0

    async def setup(self) -> bool:
        self.flow_id = int(self.scope["url_route"]["kwargs"]["flow_id"])
        return True

    def live_groups(self) -> list[str]:
        return [EVERYONE, flow_group(self.flow_id)]

    def render(self, dirty: set[str]) -> str:
        html: str
        try:
            context = flow_context(self.flow_id, timeline=True)
        except Http404:
            html = format_html(
                '<section id="flow-head" class="panel" hx-swap-oob="true"><h1>Flow {} is gone'
                '</h1><p class="muted">It was pruned from the history.</p></section>',
                self.flow_id,
            )
        else:
            html = self.fragments(
                "queue_engine/flow.html",
                ("flow-head", "flow-data", "flow-timeline", "flow-nodes"),
                context,
            )
        return self.only_news(html, full=FULL in dirty)


class JobsConsumer(LiveConsumer):
    """The jobs list: rows on screen whose state changed, and a notice of newer jobs.

    The page sends the rows it shows (id and version, see `row_version`) and its
    query string after loading and after each swap of its results. New jobs are
    not inserted (rows would move under the cursor): a notice counts them.
    """

    refresh_every = 2.0  # claims are not announced
    max_rows = 500

    async def setup(self) -> bool:
        self.shown: dict[int, str] = {}
        self.newer_sent: tuple[int, bool] = (0, False)
        self.tabs_sent: list[job_tabs.StateTab] = []
        return True

    def live_groups(self) -> list[str]:
        return [EVERYONE, OVERVIEW]

    async def handle(self, message: dict[str, Any]) -> None:
        if isinstance(message.get("rows"), list):
            self.shown = {
                row[0]: str(row[1])
                for row in message["rows"][: self.max_rows]
                if isinstance(row, list) and len(row) == 2 and isinstance(row[0], int)
            }
            self.newer_sent = (0, False)  # a fresh list shows no notice
            self.tabs_sent = []
            self.shows(QueryDict(str(message.get("query", ""))))
            return
        await super().handle(message)

    def render(self, dirty: set[str]) -> str:
        if self.query is None:  # the page has not said what it shows yet
            return ""
        parts = []
        for job_id, row in reads.job_rows(list(self.shown)).items():
            version = row_version(row)
            if self.shown[job_id] != version:
                self.shown[job_id] = version
                parts.append(self.fragment("queue_engine/jobs.html#job-row", {"job": row}))
        parts += self.newer_notice()
        parts += self.tabs()
        return "".join(parts)

    def tabs(self) -> list[str]:
        """The state tabs, when their counts changed."""
        assert self.query is not None
        filters = job_filters.JobFilters.from_query(self.query)
        try:
            tabs = job_tabs.state_tabs(filters)
        except reads.NarrowFilter:
            return []
        if tabs == self.tabs_sent:
            return []
        self.tabs_sent = tabs
        request = self.page_request(reverse("queue_engine:jobs"), self.query)
        context = {"tabs": tabs, "tabs_left_out": job_tabs.left_out(tabs), "filters": filters}
        return [self.fragment("queue_engine/jobs.html#job-tabs", context, request)]

    def newer_notice(self) -> list[str]:
        """The notice, when the count of newer matching jobs changed (on the newest page only)."""
        assert self.query is not None
        if "before" in self.query or "after" in self.query or self.query.get("sort"):
            return []  # an older page, or another order: new jobs are not at its top
        filters = job_filters.JobFilters.from_query(self.query)
        try:
            newer = job_filters.newer_jobs(filters, after=max(self.shown, default=0))
        except reads.NarrowFilter:
            return []
        if newer == self.newer_sent:
            return []
        self.newer_sent = newer
        context = {
            "newer": newer[0],
            "newer_more": newer[1],
            "newer_url": f"{reverse('queue_engine:jobs')}?{self.query.urlencode()}",
        }
        return [self.fragment("queue_engine/jobs.html#jobs-newer", context)]


def row_version(row: reads.JobRow) -> str:
    """What the page's `data-version` holds for a row (see console/jobs.html#job-row)."""
    return f"{row.state}:{row.attempt}"
