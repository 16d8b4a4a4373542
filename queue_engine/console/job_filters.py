"""The jobs list's filters as the console reads them from the URL, and the page they ask for."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from queue_engine import masking
from queue_engine.console.views.params import int_param
from queue_engine.exceptions import FilterError, NarrowFilter, PayloadError
from queue_engine.payloads import dump_json
from queue_engine.reads.jobs import (
    PAGE_SIZE,
    SORT_WINDOW,
    JobFilter,
    JobPage,
    SortedPage,
    list_jobs,
    sorted_jobs,
)
from queue_engine.reads.queues import queue_counts
from queue_engine.states import STATES

# The jobs list's sortable columns; each first sorts the way a reader looks first (the
# longest run, the most attempts, the latest), a second click reverses it.
# Id has one order, the list's own (newest first, paged by keyset).
SORTS = {"created": True, "finished": True, "runtime": True, "attempts": True}


RANGES = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
}


# The console's words for two states (see the state_label filter): a link or a user may
# say ?state=dead for failed jobs and ?state=waiting for blocked ones.
STATE_ALIASES = {"dead": "failed", "waiting": "blocked"}


@dataclass
class JobFilters:
    """The jobs list's filters, read from and written back to the URL."""

    queue: str = ""
    state: str = ""
    kind: str = ""
    q: str = ""
    range: str = ""
    payload: str = ""
    meta: str = ""
    sort: str = ""  # "" (newest first, by id) or a SORTS key, "-" in front for descending
    page: int = 1  # of a sorted list
    errors: list[str] = field(default_factory=list)

    @classmethod
    def from_query(cls, params: Any) -> JobFilters:
        state = params.get("state", "").strip()
        state = STATE_ALIASES.get(state, state)
        span = params.get("range", "").strip()
        sort = params.get("sort", "").strip()
        return cls(
            queue=params.get("queue", "").strip(),
            state=state if state in STATES else "",
            kind=params.get("kind", "").strip(),
            q=params.get("q", "").strip(),
            range=span if span in RANGES else "",
            payload=params.get("payload", "").strip(),
            meta=params.get("meta", "").strip(),
            sort=sort if sort.removeprefix("-") in SORTS else "",
            page=min(max(int_param(params, "page") or 1, 1), SORT_WINDOW // PAGE_SIZE),
        )

    @property
    def sort_key(self) -> str:
        return self.sort.removeprefix("-") or "id"

    @property
    def descending(self) -> bool:
        return not self.sort or self.sort.startswith("-")

    @property
    def counted(self) -> bool:
        """Whether the state tabs can show counts: they come from each queue's counts,
        which know queues and states, not kinds, names, times or payloads."""
        return not (self.kind or self.q or self.range or self.payload or self.meta)

    @property
    def active(self) -> bool:
        return bool(
            self.queue
            or self.state
            or self.kind
            or self.q
            or self.range
            or self.payload
            or self.meta
        )

    @property
    def job_id(self) -> int | None:
        """A search for "123" or "#123" names one job."""
        text = self.q.removeprefix("#")
        return int(text) if text.isdigit() and len(text) < 19 else None

    def since(self) -> datetime | None:
        return timezone.now() - RANGES[self.range] if self.range else None

    def tracking_filter(self) -> JobFilter:
        payload = self.containment("payload", self.payload)
        meta = self.containment("meta", self.meta)
        return JobFilter(
            queue=self.queue or None,
            state=self.state or None,  # type: ignore[arg-type]
            kind=self.kind or None,
            text=self.q or None,
            since=self.since(),
            payload=payload,
            meta=meta,
        )

    def containment(self, name: str, text: str) -> dict[str, Any] | None:
        """The filter, or None and why in `errors` when it is refused."""
        if not text:
            return None
        try:
            return containment_filter(name, text)
        except FilterError as exc:
            self.errors.append(f"{exc} It was left out.")
            return None


CONTAINMENT_EXAMPLES = {"payload": '{"to": "a@example.com"}', "meta": '{"tenant": "acme"}'}


def containment_filter(name: str, text: str) -> dict[str, Any]:
    """A payload or meta containment filter (a JSON object), refused when it is not one,
    holds text Postgres cannot store, or names a key whose value the console masks: jobs
    found or not by a guessed value would tell that value."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise FilterError(
            f"The {name} filter must be a JSON object, like {CONTAINMENT_EXAMPLES[name]}."
        )
    try:
        dump_json(value, what=f"The {name} filter")
    except PayloadError as exc:
        raise FilterError(str(exc)) from None
    key = masking.masked_key_in(value)
    if key is not None:
        raise FilterError(
            f"The {name} filter names the key {key!r}, whose values the console masks "
            "(CONSOLE_MASKED_KEYS): filtering on it would reveal them. Filter on other keys."
        )
    return value


def job_page(
    filters: JobFilters, before: int | None = None, after: int | None = None, limit: int = PAGE_SIZE
) -> JobPage:
    """One page of jobs, live and ended together, newest first; NarrowFilter past the
    statement timeout. A filter the list cannot answer is said in `filters.errors`."""
    try:
        return list_jobs(filters.tracking_filter(), before=before, after=after, limit=limit)
    except NarrowFilter:
        raise  # the page says to narrow the filter
    except FilterError as exc:
        filters.errors.append(str(exc))  # shown on the page, with no jobs
        return JobPage([], None, None)


def sorted_page(filters: JobFilters) -> SortedPage:
    """The page of a list sorted by another column than its id (see reads.sorted_jobs)."""
    try:
        return sorted_jobs(
            filters.tracking_filter(),
            sort=filters.sort_key,
            descending=filters.descending,
            page=filters.page,
        )
    except NarrowFilter:
        raise
    except FilterError as exc:
        filters.errors.append(str(exc))
        return SortedPage([], 1, False, False)


def sort_links(filters: JobFilters) -> dict[str, str]:
    """Each sortable header's `sort` value: the other way round for the current column,
    else its first direction. Id, newest first, is the list's own order."""
    links = {"id": ""}
    for name, first_descending in SORTS.items():
        descending = not filters.descending if name == filters.sort_key else first_descending
        links[name] = ("-" if descending else "") + name
    return links


@dataclass(frozen=True)
class StateTab:
    state: str  # "" for every state
    count: int | None  # None: the filters hold more than the counts know (see `counted`)
    exact: bool  # False: an estimate (a large live table, or a history above the cap)


def state_tabs(filters: JobFilters) -> list[StateTab]:
    """The jobs list's tabs, "All" first, with each state's count for the queue filter (or
    every queue): exact below the caps, estimated above them, as the overview counts."""
    if not filters.counted:
        return [StateTab(state, None, True) for state in ("", *STATES)]
    queues = queue_counts(filters.queue or None)
    tabs = []
    for state in STATES:
        counts = [q.states[state] for q in queues]
        tabs.append(StateTab(state, sum(c.count for c in counts), all(c.exact for c in counts)))
    every = StateTab("", sum(t.count or 0 for t in tabs), all(t.exact for t in tabs))
    return [every, *tabs]


NEWER_CAP = 99


def newer_jobs(filters: JobFilters, after: int, cap: int = NEWER_CAP) -> tuple[int, bool]:
    """How many jobs newer than `after` match the filters (at most `cap`), and whether more do."""
    page = job_page(filters, after=after, limit=cap)
    return len(page.jobs), page.newer is not None
