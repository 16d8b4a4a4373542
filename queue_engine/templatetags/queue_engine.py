"""Template filters for the console: times, durations, JSON. Every output is escaped."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from html import escape as escape_html
from typing import TYPE_CHECKING, Any

from django import template
from django.http import QueryDict
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from queue_engine.masking import mask
from queue_engine.states import STATE_WORDS

if TYPE_CHECKING:
    from queue_engine.models import JobLog

register = template.Library()


def relative(moment: datetime, now: datetime | None = None) -> str:
    seconds = ((now or timezone.now()) - moment).total_seconds()
    ago, seconds = seconds >= 0, abs(seconds)
    if seconds < 5:
        return "just now" if ago else "in a moment"
    if seconds < 60:
        text = f"{int(seconds)} s"
    elif seconds < 3600:
        text = f"{int(seconds // 60)} min"
    elif seconds < 86400:
        text = f"{int(seconds // 3600)} h"
    else:
        text = f"{int(seconds // 86400)} d"
    return f"{text} ago" if ago else f"in {text}"


@register.filter
def reltime(moment: datetime | str | None) -> SafeString | str:
    """A relative time ("3 min ago") with the absolute time on hover; console.js keeps it fresh."""
    if isinstance(moment, str):
        parsed = parse_datetime(moment)
        if parsed is None:
            return moment
        moment = parsed
    if moment is None:
        return "—"
    absolute = moment.astimezone(timezone.get_current_timezone())
    return format_html(
        '<time class="rel" datetime="{}" title="{}">{}</time>',
        moment.isoformat(),
        absolute.strftime("%Y-%m-%d %H:%M:%S %Z"),
        relative(moment),
    )


@register.filter
def duration(value: timedelta | float | int | None) -> str:
    if value is None:
        return "—"
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        seconds = 0.0
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    for unit, size, sub, sub_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "min", 60),
        ("min", 60, "s", 1),
    ):
        if whole >= size:
            rest = whole % size // sub_size
            return f"{whole // size} {unit}" + (f" {rest} {sub}" if rest else "")
    return f"{whole} s"


@register.filter
def since(moment: datetime | None) -> timedelta | None:
    if moment is None:
        return None
    return timezone.now() - moment


@register.filter
def masked_json(value: Any) -> str:
    """Pretty JSON with secret-looking keys masked (a plain string: the template escapes it)."""
    return json.dumps(mask(value), indent=2, ensure_ascii=False, default=str)


@register.filter
def masked_json_line(value: Any, limit: int = 160) -> str:
    """Compact one-line JSON, secret-looking keys masked, cut at `limit` characters."""
    text = json.dumps(mask(value), ensure_ascii=False, default=str, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


@register.filter
def percent(fraction: float | None) -> int:
    if fraction is None:
        return 0
    return max(0, min(100, round(fraction * 100)))


@register.filter
def short_class(path: str | None) -> str:
    """`builtins.ValueError` as `ValueError`; the full path goes in a title attribute."""
    if not path:
        return ""
    return path.rsplit(".", 1)[-1]


@register.filter
def get(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key)


LEVELS = {"warning": "warn", "critical": "crit", "error": "error", "info": "info", "debug": "debug"}


@register.filter
def log_level(level: str | None) -> str:
    """A log line's level in at most five letters ("warn"), or "log" when it has none."""
    return LEVELS.get((level or "").lower(), (level or "log")[:5])


@register.simple_tag
def log_line(line: JobLog) -> SafeString:
    """One log line, every value escaped. Built here, not by a template included per line
    nor by format_html: a job page shows up to 500 lines, and those took most of its time."""
    at = timezone.localtime(line.at)
    if line.stream == "stdout":
        label = "out"
    elif line.stream == "stderr":
        label = "err"
    else:
        label = log_level(line.level)
    stream, attempt, line_id = escape_html(line.stream), int(line.attempt), int(line.id)
    # The time links to this line: ?around= shows it even once the tail has moved past it.
    return mark_safe(
        f'<div class="log-line stream-{stream} {stream}" id="L{line_id}" data-attempt="{attempt}">'
        f'<a class="line-link" href="?around={line_id}#L{line_id}" title="Link to this line · '
        f'{at:%Y-%m-%d %H:%M:%S.%f} · attempt {attempt}"><time datetime="{line.at.isoformat()}">'
        f'{at:%H:%M:%S}</time></a><span class="stream-name">{escape_html(label)}</span>'
        f'<span class="text">{escape_html(line.text)}</span></div>'
    )


NODE_STATE_ORDER = (
    "succeeded",
    "running",
    "parked",
    "available",
    "scheduled",
    "blocked",
    "upstream_failed",
    "failed",
    "cancelled",
)


@register.filter
def node_segments(nodes: dict[str, int]) -> list[tuple[str, int, float]]:
    """A flow's node counts as (state, count, percent of all) in a fixed order, for a
    stacked progress bar; states with no node left out."""
    total = sum(nodes.values())
    if not total:
        return []
    return [
        (state, nodes[state], round(100 * nodes[state] / total, 2))
        for state in NODE_STATE_ORDER
        if nodes.get(state)
    ]


@register.filter
def minus(end: datetime | None, start: datetime | None) -> timedelta | None:
    """`end - start`, or None when either is missing (for `|duration`)."""
    if end is None or start is None:
        return None
    return end - start


@register.filter
def state_label(state: str) -> str:
    """How the console names a state (states.STATE_WORDS): a failed job is dead."""
    return STATE_WORDS.get(state, state)


@register.filter
def queue_url_name(name: str) -> str:
    """A queue name as the one path segment the console's URLs expect (see converters)."""
    from urllib.parse import quote

    from queue_engine.console.converters import QueueNameConverter

    return quote(QueueNameConverter().to_url(name), safe="~")


@register.simple_tag(takes_context=True)
def sort_header(context: Any, column: str, label: str, css: str = "") -> SafeString:
    """A sortable column's header: a link to this page sorted by it (the other way round when
    it is the current order), with `aria-sort` saying how the rows are ordered now."""
    request = context.get("request")
    params = request.GET.copy() if request is not None else QueryDict(mutable=True)
    current, descending = context.get("sort"), context.get("descending", False)
    params["sort"] = context["sorts"][column]
    if not params["sort"]:  # the page's own order
        params.pop("sort")
    for cursor in ("before", "after", "page"):  # a new order starts from its first page
        params.pop(cursor, None)
    state = ("descending" if descending else "ascending") if current == column else "none"
    arrow = {"descending": "↓", "ascending": "↑", "none": ""}[state]
    return format_html(
        '<th class="sortable {}" aria-sort="{}"><a href="?{}">{}<span class="sort-arrow"'
        ' aria-hidden="true">{}</span></a></th>',
        css,
        state,
        params.urlencode(),
        label,
        arrow,
    )


POLL_EVERY = 5  # seconds between two refreshes of a page that cannot have a websocket


@register.simple_tag
def live_updates(route: str, *args: Any, parts: str = "", **query: Any) -> SafeString:
    """The attributes that keep a page's changing parts up to date: a websocket to
    `route` (a console URL name, with `query` as its query string) where this process
    serves the console's sockets, else a poll of the page itself every few seconds that
    swaps in the `parts` (ids, comma separated) it brings back."""
    from urllib.parse import urlencode

    from django.urls import reverse

    from queue_engine.console.sockets import websockets_on

    if websockets_on():
        url = reverse(f"queue_engine:{route}", args=args)
        given = {name: value for name, value in query.items() if value not in (None, "")}
        if given:
            url = f"{url}?{urlencode(given)}"
        return format_html('hx-ext="ws" ws-connect="{}"', url)
    ids = ",".join(f"#{part.strip()}" for part in parts.split(",") if part.strip())
    return format_html(
        'data-poll hx-get="" hx-trigger="every {}s" hx-swap="none" hx-select-oob="{}"',
        POLL_EVERY,
        ids,
    )
