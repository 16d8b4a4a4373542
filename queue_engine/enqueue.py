"""The write side: every way application code puts a job into the queue.

Everything runs on Django's connection, so it joins the caller's transaction:
a rolled-back enqueue never runs, and workers see a job only at commit.
Validation happens before the first write, so bad input writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.db import connection, transaction
from django.utils import timezone

from queue_engine import sql
from queue_engine.conf import snapshot
from queue_engine.definitions import (
    Backoff,
    EnqueueOptions,
    JobDefinition,
    Seconds,
    to_seconds,
)
from queue_engine.models import Job
from queue_engine.payloads import PayloadError, dump_json
from queue_engine.registry import registry


class EnqueueError(ValueError):
    """A job that cannot be enqueued as asked; nothing was written."""


class UnknownKindError(EnqueueError):
    pass


class InvalidPayloadError(EnqueueError, PayloadError):
    pass


@dataclass
class JobSpec:
    """One job to enqueue, for `enqueue` and `enqueue_many` (any kind, any options)."""

    kind: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    queue: str | None = None
    priority: int | None = None
    run_at: datetime | None = None
    delay: Seconds | None = None
    dedup_key: str | None = None
    max_attempts: int | None = None
    name: str | None = None
    group_key: str | None = None
    labels: Sequence[str] | None = None
    meta: Mapping[str, Any] | None = None
    backoff: Backoff | None = None


@dataclass(frozen=True, slots=True)
class Row:
    """A validated job, ready to insert."""

    queue: str
    kind: str
    name: str
    priority: int
    payload: str
    max_attempts: int
    backoff: str | None
    dedup_key: str | None
    group_key: str | None
    labels: list[str]
    meta: str
    run_at: datetime | None
    delay: float
    payload_value: Mapping[str, Any]
    meta_value: Mapping[str, Any]

    def params(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "kind": self.kind,
            "name": self.name,
            "priority": self.priority,
            "payload": self.payload,
            "max_attempts": self.max_attempts,
            "backoff": self.backoff,
            "dedup_key": self.dedup_key,
            "group_key": self.group_key,
            "labels": self.labels,
            "meta": self.meta,
            "run_at": self.run_at,
            "delay": self.delay,
        }


def spec_for(definition: JobDefinition, payload: Mapping[str, Any]) -> JobSpec:
    o: EnqueueOptions = definition.options
    return JobSpec(
        kind=definition.kind,
        payload=payload,
        queue=o.queue,
        priority=o.priority,
        run_at=o.run_at,
        delay=o.delay,
        dedup_key=o.dedup_key,
        max_attempts=o.max_attempts,
        name=o.name,
        group_key=o.group_key,
        labels=o.labels,
        meta=o.meta,
    )


def prepare(
    spec: JobSpec, definition: JobDefinition | None = None, options: dict[str, Any] | None = None
) -> Row:
    """Validate a spec against its kind's definition and the engine's options."""
    opts = options if options is not None else snapshot()
    kind = spec.kind
    if definition is None:
        definition = registry.get(kind)
    if definition is None and not opts["ALLOW_UNKNOWN_KINDS"]:
        known = ", ".join(registry.kinds()[:10]) or "none"
        raise UnknownKindError(
            f"Unknown job kind {kind!r}: no @job with that kind is registered in this process "
            f"(known: {known}). Import the module that defines it (QUEUE_ENGINE['JOB_MODULES']), "
            "or set QUEUE_ENGINE['ALLOW_UNKNOWN_KINDS'] = True to enqueue kinds another "
            "process runs."
        )
    if not isinstance(spec.payload, Mapping):
        raise InvalidPayloadError(
            f"{kind}: the payload must be a dict of named arguments, "
            f"not a {type(spec.payload).__name__}."
        )
    payload = dict(spec.payload)
    try:
        payload_text = dump_json(
            payload, what=f"{kind}: the payload", max_bytes=opts["MAX_PAYLOAD_BYTES"]
        )
        meta = dict(spec.meta or {})
        meta_text = dump_json(meta, what=f"{kind}: meta") if meta else "{}"
    except PayloadError as exc:
        raise InvalidPayloadError(str(exc)) from None

    queue = spec.queue or (definition.queue if definition else opts["DEFAULT_QUEUE"])
    check_queue(kind, queue, opts)
    priority = (
        spec.priority if spec.priority is not None else (definition.priority if definition else 0)
    )
    if not isinstance(priority, int) or not -100 <= priority <= 100:
        raise EnqueueError(
            f"{kind}: priority must be a whole number from -100 to 100 (higher runs first), "
            f"not {priority!r}."
        )
    max_attempts = spec.max_attempts or (
        definition.max_attempts if definition else opts["DEFAULT_MAX_ATTEMPTS"]
    )
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise EnqueueError(f"{kind}: max_attempts must be at least 1, not {max_attempts!r}.")
    if spec.run_at is not None and spec.delay is not None:
        raise EnqueueError(f"{kind}: give run_at or delay, not both.")
    if spec.run_at is not None and timezone.is_naive(spec.run_at):
        raise EnqueueError(
            f"{kind}: run_at {spec.run_at.isoformat()} has no time zone; pass an aware "
            "datetime, for example django.utils.timezone.now() + timedelta(minutes=5)."
        )
    delay = to_seconds(spec.delay) or 0.0
    if delay < 0:
        raise EnqueueError(f"{kind}: delay must not be negative, not {delay}.")
    name = (
        spec.name
        if spec.name is not None
        else (definition.display_name_for(payload) if definition else "")
    )
    group_key = (
        spec.group_key
        if spec.group_key is not None
        else (definition.group_key_for(payload) if definition else None)
    )
    labels = list(
        spec.labels if spec.labels is not None else (definition.labels if definition else ())
    )
    for text, what in ((spec.dedup_key, "dedup_key"), (group_key, "group_key")):
        if text is not None and (not isinstance(text, str) or not 0 < len(text) <= 255):
            raise EnqueueError(f"{kind}: {what} must be a string of 1 to 255 characters.")
    backoff = spec.backoff.to_json() if spec.backoff else None
    return Row(
        queue=queue,
        kind=kind,
        name=str(name)[:255],
        priority=priority,
        payload=payload_text,
        max_attempts=max_attempts,
        backoff=dump_json(backoff, what="backoff") if backoff else None,
        dedup_key=spec.dedup_key,
        group_key=group_key,
        labels=labels,
        meta=meta_text,
        run_at=spec.run_at,
        delay=delay,
        payload_value=payload,
        meta_value=meta,
    )


def check_queue(kind: str, queue: str, opts: dict[str, Any]) -> None:
    if not isinstance(queue, str) or not 0 < len(queue) <= 128:
        raise EnqueueError(f"{kind}: queue must be a name of 1 to 128 characters, not {queue!r}.")
    declared = opts["QUEUES"]
    if not opts["ALLOW_UNDECLARED_QUEUES"] and queue not in declared:
        names = ", ".join(sorted(declared)) or "none"
        raise EnqueueError(
            f"{kind}: queue {queue!r} is not declared (declared: {names}); add it to "
            "QUEUE_ENGINE['QUEUES'] or pick a declared queue."
        )


def enqueue(spec: JobSpec) -> Job:
    """Enqueue one job of any kind; with a dedup key, an existing live job is returned."""
    return _insert(prepare(spec), debounce=False)


def insert_row(row: Row) -> Job:
    return _insert(row, debounce=False)


def enqueue_definition(
    definition: JobDefinition, payload: dict[str, Any], *, debounce: bool = False
) -> Job:
    spec = spec_for(definition, payload)
    if debounce and not spec.dedup_key:
        raise EnqueueError(
            f"{definition.kind}: enqueue_debounced needs a dedup key, "
            "for example .using(dedup_key='user:42', delay=5).enqueue_debounced(...)."
        )
    return _insert(prepare(spec, definition), debounce=debounce)


def enqueue_debounced(spec: JobSpec) -> Job:
    if not spec.dedup_key:
        raise EnqueueError(f"{spec.kind}: enqueue_debounced needs a dedup_key.")
    return _insert(prepare(spec), debounce=True)


def _insert(row: Row, *, debounce: bool) -> Job:
    params = row.params()
    if row.dedup_key is None:  # one statement: atomic on its own, no savepoint needed
        with connection.cursor() as cursor:
            cursor.execute(sql.INSERT_JOB, params)
            return _job(row, cursor.fetchone(), deduplicated=False)
    with transaction.atomic(), connection.cursor() as cursor:
        for _ in range(5):
            cursor.execute(sql.UPSERT_JOB_DEBOUNCED if debounce else sql.INSERT_JOB_DEDUP, params)
            found = cursor.fetchone()
            if found is not None:
                if debounce and found[-1] and found[1] == "available":
                    cursor.execute(sql.NOTIFY_WAKE, [row.queue])
                return _job(row, found, deduplicated=found[-1])
            cursor.execute(sql.SELECT_JOB_ID_BY_DEDUP_KEY, [row.kind, row.dedup_key])
            holder = cursor.fetchone()
            if holder is None:
                continue  # the holder ended between the two statements: insert again
            existing = Job.objects.get(pk=holder[0])
            if debounce and existing.state == "running":
                cursor.execute(sql.RELEASE_RUNNING_DEDUP_KEY, [row.kind, row.dedup_key])
                continue
            existing.deduplicated = True  # type: ignore[attr-defined]
            return existing
    raise EnqueueError(f"{row.kind}: dedup key {row.dedup_key!r} kept changing hands; try again.")


def _job(row: Row, returned: tuple[Any, ...], *, deduplicated: bool) -> Job:
    job_id, state, run_at, created_at, _ = returned
    job = Job(
        id=job_id,
        queue=row.queue,
        kind=row.kind,
        name=row.name,
        state=state,
        priority=row.priority,
        payload=row.payload_value,
        max_attempts=row.max_attempts,
        dedup_key=row.dedup_key,
        group_key=row.group_key,
        labels=row.labels,
        meta=row.meta_value,
        run_at=run_at,
        created_at=created_at,
        backoff=json.loads(row.backoff) if row.backoff else None,
        attempt=0,
        errors=[],
        progress_message="",
        rescues=0,
        pending_deps=0,
    )
    job._state.adding = False
    job._state.db = connection.alias
    job.deduplicated = deduplicated  # type: ignore[attr-defined]
    return job


def enqueue_many(specs: Iterable[JobSpec]) -> list[int]:
    """Enqueue many jobs in one statement; ids come back in input order.

    A spec whose dedup key is already held (by a live job, or by an earlier spec
    in the same call) gets the holder's id.
    """
    opts = snapshot()
    rows = [prepare(spec, options=opts) for spec in specs]
    if not rows:
        return []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.ALLOCATE_JOB_IDS, [len(rows)])
        now, ids = cursor.fetchone()
        columns = _bulk_columns(rows, ids, now)
        if not any(row.dedup_key for row in rows):
            with cursor.cursor.copy(sql.COPY_JOBS) as copy:
                for values in zip(*columns, strict=True):
                    copy.write_row(values)
            return list(ids)
        labels = ["{" + ",".join(_array_item(x) for x in labels) + "}" for labels in columns[10]]
        # A server-binding cursor sends the arrays as parameters, not quoted text.
        with psycopg.Cursor(cursor.connection) as raw:
            raw.execute(sql.INSERT_JOBS_UNNEST, [*columns[:10], labels, *columns[11:]])
            inserted = {r[0] for r in raw.fetchall()}
        missing = [
            (row.kind, row.dedup_key) for row, i in zip(rows, ids, strict=True) if i not in inserted
        ]
        if not missing:
            return list(ids)
        cursor.execute(
            sql.SELECT_JOB_IDS_BY_DEDUP_KEYS, [[k for k, _ in missing], [d for _, d in missing]]
        )
        holders = {(kind, key): job_id for kind, key, job_id in cursor.fetchall()}
        return [
            i if i in inserted else holders[(row.kind, row.dedup_key)]
            for row, i in zip(rows, ids, strict=True)
        ]


def _bulk_columns(rows: list[Row], ids: list[int], now: datetime) -> list[list[Any]]:
    run_ats: list[datetime] = []
    states: list[str] = []
    for row in rows:
        run_at = (
            row.run_at
            if row.run_at is not None
            else (now + timedelta(seconds=row.delay) if row.delay else now)
        )
        run_ats.append(run_at)
        states.append("scheduled" if run_at > now else "available")
    return [
        list(ids),
        [r.queue for r in rows],
        [r.kind for r in rows],
        [r.name for r in rows],
        [r.priority for r in rows],
        [r.payload for r in rows],
        [r.max_attempts for r in rows],
        [r.backoff for r in rows],
        [r.dedup_key for r in rows],
        [r.group_key for r in rows],
        [r.labels for r in rows],
        [r.meta for r in rows],
        run_ats,
        states,
    ]


def _array_item(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
