"""The jobs list's filters as the console reads them from the URL, and the page they ask for."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from queue_engine import masking
from queue_engine.console.params import int_param
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


# The console's words for states (see the state_label filter): a link or a user may say
# ?state=dead (or discarded) for failed jobs, completed for succeeded ones.
STATE_ALIASES = {"dead": "failed", "discarded": "failed", "completed": "succeeded"}


# The error class filter's value for jobs with no error recorded (whose class is "").
NO_ERROR_CLASS = "(none)"


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
    error_class: str = ""  # the last error's class; NO_ERROR_CLASS: no error recorded
    message: str = ""  # inside the last error's message
    worker: str = ""  # the worker that ran the job last, or its host
    group: str = ""  # the group key, exactly
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
            error_class=params.get("error_class", "").strip(),
            message=params.get("message", "").strip(),
            worker=params.get("worker", "").strip(),
            group=params.get("group", "").strip(),
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
    def active(self) -> bool:
        return bool(self.queue or self.state or self.kind or self.unindexed)

    @property
    def unindexed(self) -> list[str]:
        """The filters set that no count index knows, as the page names them."""
        named = (
            (self.q, "search"),
            (self.range, "time"),
            (self.payload, "payload"),
            (self.meta, "meta"),
            (self.error_class, "error class"),
            (self.message, "error message"),
            (self.worker, "worker"),
            (self.group, "group key"),
        )
        return [name for value, name in named if value]

    @property
    def job_id(self) -> int | None:
        """A search for "123" or "#123" names one job."""
        text = self.q.removeprefix("#")
        return int(text) if text.isdigit() and len(text) < 19 else None

    def since(self) -> datetime | None:
        return timezone.now() - RANGES[self.range] if self.range else None

    def read_filter(self) -> JobFilter:
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
            error_class=self.last_error_class(),
            message=self.message or None,
            worker=self.worker or None,
            group=self.group or None,
        )

    def last_error_class(self) -> str | None:
        if self.error_class == NO_ERROR_CLASS:
            return ""
        return self.error_class or None

    def containment(self, name: str, text: str) -> dict[str, Any] | None:
        """The filter, or None and why in `errors` when it is refused."""
        if not text:
            return None
        try:
            return containment_filter(name, text)
        except FilterError as exc:
            said = f"{exc} It was left out."
            if said not in self.errors:  # the list and its counts both ask
                self.errors.append(said)
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
        return list_jobs(filters.read_filter(), before=before, after=after, limit=limit)
    except NarrowFilter:
        raise  # the page says to narrow the filter
    except FilterError as exc:
        filters.errors.append(str(exc))  # shown on the page, with no jobs
        return JobPage([], None, None)


def sorted_page(filters: JobFilters) -> SortedPage:
    """The page of a list sorted by another column than its id (see reads.sorted_jobs)."""
    try:
        return sorted_jobs(
            filters.read_filter(),
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


NEWER_CAP = 99


def newer_jobs(filters: JobFilters, after: int, cap: int = NEWER_CAP) -> tuple[int, bool]:
    """How many jobs newer than `after` match the filters (at most `cap`), and whether more do."""
    page = job_page(filters, after=after, limit=cap)
    return len(page.jobs), page.newer is not None
