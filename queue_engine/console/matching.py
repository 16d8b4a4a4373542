"""Bulk actions on every job that matches the jobs list's filter, however many.

The confirmation counts them exactly (under the console's statement timeout)
and fixes the newest id, so jobs that arrive afterwards are left out. Up to
SYNC_LIMIT jobs are handled in the request; more run as a job of this engine
(`run_bulk`), in batches of short transactions through `ops`, reporting its
progress on its own job page.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from queue_engine import job, reads, sql, states
from queue_engine.conf import option
from queue_engine.console import actions, job_filters
from queue_engine.models import Job, JobRecord

BATCH = 1000
SYNC_LIMIT = 1000
FILTER_FIELDS = (
    "queue", "state", "kind", "q", "payload", "meta", "error_class", "message", "worker", "group",
    "since",
)  # fmt: skip


@dataclass
class MatchPlan:
    action: actions.Action
    filters: dict[str, str]
    upto: int
    changes: list[tuple[int, str, str]] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    count: int = 0

    @property
    def verb(self) -> str:
        return actions.VERBS[self.action]

    @property
    def dangerous(self) -> bool:
        return self.action in ("cancel", "remove")

    @property
    def background(self) -> bool:
        return self.count > SYNC_LIMIT


def filter_params(filters: job_filters.JobFilters) -> dict[str, str]:
    """The filter as form fields, with the time range fixed to an absolute start."""
    since = filters.since()
    return {
        "queue": filters.queue,
        "state": filters.state,
        "kind": filters.kind,
        "q": filters.q,
        "payload": filters.payload,
        "meta": filters.meta,
        "error_class": filters.error_class,
        "message": filters.message,
        "worker": filters.worker,
        "group": filters.group,
        "since": since.isoformat() if since else "",
    }


def _matching(
    model: type[Job] | type[JobRecord], params: dict[str, str], upto: int
) -> QuerySet[Any]:
    qs = model.objects.filter(id__lte=upto)
    if params.get("queue"):
        qs = qs.filter(queue=params["queue"])
    if params.get("state"):
        qs = qs.filter(state=params["state"])
    if params.get("kind"):
        qs = qs.filter(kind=params["kind"])
    if params.get("q"):
        qs = qs.filter(name__icontains=params["q"])
    if params.get("group"):
        qs = qs.filter(group_key=params["group"])
    for field_name in ("payload", "meta"):
        if params.get(field_name):
            value = job_filters.containment_filter(field_name, params[field_name])
            qs = qs.filter(**{f"{field_name}__contains": value})
    qs = _error_and_worker(qs, model, params)
    since = parse_since(params.get("since", ""))
    if since is not None:
        qs = qs.filter(**{"finished_at__gte" if model is JobRecord else "created_at__gte": since})
    return qs


def _error_and_worker(
    qs: QuerySet[Any], model: type[Job] | type[JobRecord], params: dict[str, str]
) -> QuerySet[Any]:
    """The last error's class and message, and the worker, as the jobs list reads them."""
    if params.get("error_class"):
        wanted = params["error_class"]
        qs = qs.annotate(last_class=RawSQL(sql.LAST_ERROR_CLASS, [])).filter(
            last_class="" if wanted == job_filters.NO_ERROR_CLASS else wanted
        )
    if params.get("message"):
        qs = qs.annotate(last_message=RawSQL("errors->-1->>'message'", [])).filter(
            last_message__icontains=params["message"]
        )
    if params.get("worker"):
        column = "worker" if model is JobRecord else "lease_owner"
        worker = params["worker"]
        qs = qs.filter(Q(**{column: worker}) | Q(**{f"{column}__startswith": f"{worker}:"}))
    return qs


def parse_since(text: str) -> datetime | None:
    """The filter's start, refused (FilterError) when it is not a date and time with a zone:
    a filter left out would act on more jobs than were counted for the confirmation."""
    if not text:
        return None
    try:
        since = parse_datetime(text)
    except ValueError:
        since = None
    if since is None or timezone.is_naive(since):
        raise reads.FilterError(
            f"The since filter must be a date and time with its zone, like "
            f"2026-01-01T00:00:00+00:00, not {text[:40]!r}."
        )
    return since


def check(params: dict[str, str]) -> None:
    """Refuse (FilterError) a filter that cannot be applied as written, before counting."""
    _matching(Job, params, 0)


def _models(params: dict[str, str]) -> list[type[Job] | type[JobRecord]]:
    state = params.get("state", "")
    found: list[type[Job] | type[JobRecord]] = []
    if state in ("", *states.LIVE_STATES):
        found.append(Job)
    if state in ("", *states.ENDED_STATES):
        found.append(JobRecord)
    return found


def newest_id() -> int:
    newest = [m.objects.aggregate(n=Max("id"))["n"] or 0 for m in (Job, JobRecord)]
    return max(newest)


def plan(action: actions.Action, params: dict[str, str], upto: int | None = None) -> MatchPlan:
    """Count, exactly, what the action would do to every job matching the filter."""
    check(params)
    upto = newest_id() if upto is None else upto
    result = MatchPlan(action, params, upto)
    effects = actions.EFFECTS[action]
    by_state: Counter[str] = Counter()
    with reads.time_limited():
        for model in _models(params):
            for row in _matching(model, params, upto).values("state").annotate(n=Count("id")):
                by_state[row["state"]] += row["n"]
        if action == "retry" and JobRecord in _models(params):
            flow_nodes = (
                _matching(JobRecord, params, upto)
                .filter(state="succeeded", flow_id__isnull=False)
                .count()
            )
            if flow_nodes:
                by_state["succeeded"] -= flow_nodes
                result.skipped.append(
                    (flow_nodes, actions.said(flow_nodes, actions.SUCCEEDED_FLOW_NODES))
                )
        if action == "cancel" and Job in _models(params):
            stopping = (
                _matching(Job, params, upto)
                .filter(state="running", meta__has_key="cancel_requested")
                .count()
            )
            if stopping:
                by_state["running"] -= stopping
                result.skipped.append((stopping, actions.said(stopping, actions.ALREADY_STOPPING)))
    skipped = sum(n for state, n in by_state.items() if state not in effects)
    result.changes = [
        (n, state, actions.said(n, effects[state]))
        for state, n in sorted(by_state.items())
        if state in effects and n
    ]
    result.count = sum(n for n, _, _ in result.changes)
    if skipped:
        result.skipped.append((skipped, actions.said(skipped, actions.SKIPPED_BECAUSE[action])))
    return result


def batches(action: actions.Action, params: dict[str, str], upto: int) -> Iterator[list[int]]:
    """Ids of the matching jobs the action applies to, oldest first, BATCH at a time."""
    states = list(actions.EFFECTS[action])
    for model in _models(params):
        after = 0
        while True:
            matching = _matching(model, params, upto).filter(id__gt=after, state__in=states)
            if action == "retry" and model is JobRecord:
                matching = matching.exclude(state="succeeded", flow_id__isnull=False)
            if action == "cancel" and model is Job:
                matching = matching.exclude(state="running", meta__has_key="cancel_requested")
            ids = list(matching.order_by("id").values_list("id", flat=True)[:BATCH])
            if not ids:
                break
            after = ids[-1]
            yield ids


def execute(
    action: actions.Action,
    params: dict[str, str],
    upto: int,
    actor: Any,
    progress: Any = None,
    total: int = 0,
) -> int:
    check(params)
    done = 0
    for ids in batches(action, params, upto):
        done += actions.execute(action, ids, actor)
        if progress is not None and total:
            progress(min(done / total, 1.0), f"{done} of {total} {actions.DONE[action]}")
    return done


@job(
    max_attempts=1,  # type: ignore[untyped-decorator]
    name=lambda p: f"Console: {p['action']} {p['total']} matching jobs",
)
def run_bulk(
    ctx: Any, action: str, filters: dict[str, str], upto: int, total: int, actor: str
) -> dict[str, int]:
    """A console bulk action too large for one request, run by a worker with its progress."""
    if action not in actions.ACTIONS:
        raise ValueError(f"unknown bulk action {action!r}")
    done = execute(
        action,
        filters,
        upto,
        actor,
        progress=ctx.progress,  # type: ignore[arg-type]
        total=total,
    )
    return {"done": done, "confirmed": total}


def start_in_background(plan_: MatchPlan, actor: str) -> int:
    """Enqueue `run_bulk` for this plan; returns the job's id."""
    enqueued = run_bulk.using(queue=option("DEFAULT_QUEUE")).enqueue(
        action=plan_.action, filters=plan_.filters, upto=plan_.upto, total=plan_.count, actor=actor
    )
    return int(enqueued.id)
