"""The write side: every way application code puts a job into the queue.

Everything runs on Django's connection, so it joins the caller's transaction:
a rolled-back enqueue never runs, and workers see a job only at commit.
Bad input raises before anything is committed, so it writes nothing: a single
enqueue checks before its INSERT, a bulk COPY aborts on the first bad row.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import signals
from django.db.models.base import ModelState
from django.dispatch import receiver

from queue_engine import sql
from queue_engine.conf import snapshot
from queue_engine.connections import bound_cursor, prepared, raw_cursor
from queue_engine.definitions import (
    Backoff,
    Call,
    EnqueueOptions,
    JobDefinition,
    delay_problem,
    labels_problem,
    max_attempts_problem,
    priority_problem,
    run_at_problem,
)
from queue_engine.durations import Seconds, to_seconds
from queue_engine.exceptions import (
    EnqueueError,
    InvalidPayloadError,
    PayloadError,
    UnknownKindError,
)
from queue_engine.models import Job
from queue_engine.payloads import dump_json, text_problem
from queue_engine.registry import registry


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


@dataclass(slots=True)
class Row:
    """A validated job, ready to insert: what its payload decides, and (in `decided`)
    what its kind and options decide."""

    kind: str
    name: str
    payload: str
    dedup_key: str | None
    group_key: str | None
    meta: str
    payload_value: Mapping[str, Any]
    meta_value: Mapping[str, Any]
    decided: KindOptions

    @property
    def queue(self) -> str:
        return self.decided.queue

    @property
    def priority(self) -> int:
        return self.decided.priority

    @property
    def max_attempts(self) -> int:
        return self.decided.max_attempts

    @property
    def backoff(self) -> str | None:
        return self.decided.backoff

    @property
    def labels(self) -> list[str]:
        return self.decided.labels

    @property
    def run_at(self) -> datetime | None:
        return self.decided.run_at

    @property
    def delay(self) -> float:
        return self.decided.delay

    def starts_at(self, now: datetime) -> datetime:
        """When the job may run, given the database clock of its insert."""
        if self.run_at is not None:
            return self.run_at
        return now + timedelta(seconds=self.delay) if self.delay else now

    @property
    def plain(self) -> bool:
        """Whether every column but queue, kind, payload and max_attempts takes its default
        (sql.INSERT_PLAIN_JOB)."""
        return (
            not self.name
            and self.dedup_key is None
            and self.group_key is None
            and self.meta == "{}"
            and self.decided.plain
        )

    def values(self) -> tuple[Any, ...]:
        """INSERT_JOB's parameters, in its $n order (sql.INSERT_JOB_PARAMS)."""
        return tuple(getattr(self, name) for name in sql.INSERT_JOB_PARAMS)

    def params(self) -> dict[str, Any]:
        """INSERT_JOB's parameters by name (also those of its dedup variants)."""
        return {name: getattr(self, name) for name in sql.INSERT_JOB_PARAMS}


@dataclass(frozen=True, slots=True)
class KindOptions:
    """What a job's kind and per-call options decide, whatever its payload.

    `enqueue_many` checks each distinct set once (see `prepare`'s `seen`), not once a job.
    """

    definition: JobDefinition | None
    queue: str
    priority: int
    max_attempts: int
    labels: list[str]
    backoff: str | None
    run_at: datetime | None
    delay: float

    @property
    def plain(self) -> bool:
        """Whether the columns these options decide, but queue and max_attempts, all take
        their defaults (half of Row.plain)."""
        return (
            not self.priority
            and self.backoff is None
            and not self.labels
            and self.run_at is None
            and not self.delay
        )


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


type SeenOptions = dict[tuple[Any, ...], KindOptions]


def prepare(
    spec: JobSpec,
    definition: JobDefinition | None = None,
    options: dict[str, Any] | None = None,
    *,
    seen: SeenOptions | None = None,
) -> Row:
    """Validate a spec against its kind's definition and the engine's options.

    `seen` caches the payload-independent checks across the specs of one call.
    """
    opts = options if options is not None else snapshot()
    kind = spec.kind
    if seen is None:
        decided = kind_options(spec, definition, opts)
    else:
        labels = spec.labels
        key = (
            kind,
            spec.queue,
            spec.priority,
            spec.max_attempts,
            labels if labels is None or type(labels) is tuple else tuple(labels),
            spec.backoff,
            spec.run_at,
            spec.delay,
        )
        try:
            found = seen.get(key)
        except TypeError:  # an unhashable option: kind_options says what is wrong with it
            found = kind_options(spec, definition, opts)
        if found is None:
            found = seen[key] = kind_options(spec, definition, opts)
        decided = found
    payload = spec.payload
    if not isinstance(payload, Mapping):
        raise InvalidPayloadError(
            f"{kind}: the payload must be a dict of named arguments, "
            f"not a {type(payload).__name__}."
        )
    return build_row(
        decided, kind, dict(payload), spec.dedup_key, spec.name, spec.group_key, spec.meta, opts
    )


def build_row(
    decided: KindOptions,
    kind: str,
    payload: dict[str, Any],
    dedup_key: str | None,
    name: str | None,
    group_key: str | None,
    meta: Mapping[str, Any] | None,
    opts: dict[str, Any],
) -> Row:
    """The payload-dependent half of `prepare`: `payload` must be the caller's own copy."""
    definition = decided.definition
    try:
        payload_text = dump_json(
            payload, what=f"{kind}: the payload", max_bytes=opts["MAX_PAYLOAD_BYTES"]
        )
        meta = dict(meta) if meta else {}
        meta_text = dump_json(meta, what=f"{kind}: meta") if meta else "{}"
    except PayloadError as exc:
        raise InvalidPayloadError(str(exc)) from None
    if name is None:
        name = definition.display_name_for(payload) if definition else ""
    if group_key is None and definition is not None:
        group_key = definition.group_key_for(payload)
    for text, what in ((dedup_key, "dedup_key"), (group_key, "group_key")):
        if text is not None and (type(text) is not str or not 0 < len(text) <= 255):
            raise EnqueueError(f"{kind}: {what} must be a string of 1 to 255 characters.")
    if type(name) is not str or len(name) > 255:
        name = str(name)[:255]
    for text, what in ((name, "display name"), (dedup_key, "dedup_key"), (group_key, "group_key")):
        problem = text_problem(text) if text else None
        if problem is not None:
            raise EnqueueError(f"{kind}: the {what} {text!r} {problem}")
    return Row(
        kind,
        name,
        payload_text,
        dedup_key,
        group_key,
        meta_text,
        payload,
        meta,
        decided,
    )


def kind_options(
    spec: JobSpec, definition: JobDefinition | None, opts: dict[str, Any]
) -> KindOptions:
    """Check what the kind and the options decide (everything but the payload)."""
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
    if definition is None:
        if not isinstance(kind, str) or not 0 < len(kind) <= 255:
            raise EnqueueError(f"a job kind must be a name of 1 to 255 characters, not {kind!r}.")
        problem = text_problem(kind)
        if problem is not None:
            raise EnqueueError(f"the job kind {kind!r} {problem}")
    queue = spec.queue or (definition.queue if definition else opts["DEFAULT_QUEUE"])
    check_queue(kind, queue, opts)
    priority = (
        spec.priority if spec.priority is not None else (definition.priority if definition else 0)
    )
    max_attempts = (
        spec.max_attempts
        if spec.max_attempts is not None
        else (definition.max_attempts if definition else opts["DEFAULT_MAX_ATTEMPTS"])
    )
    labels = spec.labels if spec.labels is not None else (definition.labels if definition else ())
    problem = priority_problem(priority) or max_attempts_problem(max_attempts)
    if problem is None and spec.run_at is not None:
        problem = (
            "give run_at or delay, not both."
            if spec.delay is not None
            else run_at_problem(spec.run_at)
        )
    if problem is None and spec.delay is not None:
        problem = delay_problem(spec.delay)
    if problem is None:
        problem = labels_problem(labels)
    if problem is None and spec.backoff is not None and not isinstance(spec.backoff, Backoff):
        problem = f"backoff must be a Backoff, such as Backoff.fixed(30), not {spec.backoff!r}."
    if problem is not None:
        raise EnqueueError(f"{kind}: {problem}")
    delay = to_seconds(spec.delay) or 0.0
    backoff = spec.backoff.to_json() if spec.backoff else None
    return KindOptions(
        definition=definition,
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
        labels=list(labels),
        backoff=dump_json(backoff, what="backoff") if backoff else None,
        run_at=spec.run_at,
        delay=delay,
    )


def check_queue(kind: str, queue: str, opts: dict[str, Any]) -> None:
    if not isinstance(queue, str) or not 0 < len(queue) <= 128:
        raise EnqueueError(f"{kind}: queue must be a name of 1 to 128 characters, not {queue!r}.")
    problem = text_problem(queue)
    if problem is not None:
        raise EnqueueError(f"{kind}: the queue name {queue!r} {problem}")
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
    if not debounce:
        plain = _plain_kind(definition)
        if plain is not None:
            return _insert_plain(plain, payload)
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
    use_prepared = prepared()
    if row.dedup_key is None:  # one statement: atomic on its own, no savepoint needed
        db = connections[DEFAULT_DB_ALIAS]
        raw = raw_cursor(db)
        with db.wrap_database_errors:
            if row.plain:
                values = (row.queue, row.kind, row.payload, row.max_attempts)
                raw.execute(sql.INSERT_PLAIN_JOB, values, prepare=use_prepared)
                job_id, created_at = raw.fetchone() or (None, None)
                inserted: tuple[Any, ...] = (job_id, "available", created_at, created_at, False)
            else:
                raw.execute(sql.INSERT_JOB_NUMBERED, row.values(), prepare=use_prepared)
                inserted = raw.fetchone() or ()  # INSERT .. RETURNING: always a row
        return _job(row, inserted, deduplicated=False)
    params = row.params()
    with transaction.atomic(), bound_cursor() as cursor:
        for _ in range(5):
            cursor.execute(
                sql.UPSERT_JOB_DEBOUNCED if debounce else sql.INSERT_JOB_DEDUP,
                params,
                prepare=use_prepared,
            )
            found = cursor.fetchone()
            if found is not None:
                if debounce and found[-1] and found[1] == "available":
                    cursor.execute(sql.NOTIFY_WAKE, [row.queue])
                return _job(row, found, deduplicated=found[-1])
            cursor.execute(sql.SELECT_JOB_ID_BY_DEDUP_KEY, [row.kind, row.dedup_key])
            holder = cursor.fetchone()
            if holder is None:
                continue  # the holder ended between the two statements: insert again
            existing = Job.objects.filter(pk=holder[0]).first()
            if existing is None:
                continue  # and that holder ended since: insert again
            if debounce and existing.state == "running":
                cursor.execute(sql.RELEASE_RUNNING_DEDUP_KEY, [row.kind, row.dedup_key])
                continue
            existing.deduplicated = True  # type: ignore[attr-defined]
            return existing
    raise EnqueueError(f"{row.kind}: dedup key {row.dedup_key!r} kept changing hands; try again.")


@dataclass(frozen=True, slots=True)
class PlainKind:
    """What a definition without overrides decides for every job it enqueues as a plain
    job (`Row.plain`): the single enqueue's fast path checks only the payload."""

    queue: str
    kind: str
    max_attempts: int
    max_bytes: int
    what: str
    prepare: bool | None
    fields: dict[str, Any]  # the new Job's fields that do not depend on the call


class _Generation:
    """Changes whenever Django's settings do (override_settings in tests)."""


_settings_generation = _Generation()


@receiver(setting_changed)
def _settings_changed(**kwargs: Any) -> None:
    global _settings_generation
    _settings_generation = _Generation()


def _plain_kind(definition: JobDefinition) -> PlainKind | None:
    """The definition's PlainKind, or None when its jobs are not plain; cached on the
    definition until the settings change."""
    generation = _settings_generation
    cached: tuple[_Generation, PlainKind | None] | None = definition.__dict__.get("_plain")
    if cached is not None and cached[0] is generation:
        return cached[1]
    opts = snapshot()
    decided = kind_options(spec_for(definition, {}), definition, opts)
    plain = None
    if (
        definition.options == EnqueueOptions()
        and definition.name is None
        and definition.group_key is None
        and decided.plain
    ):
        fields = dict.fromkeys(_job_attnames())
        fields.update(_constant_fields(decided, definition.kind))
        fields["name"] = ""  # the column's default, as stored
        plain = PlainKind(
            queue=decided.queue,
            kind=definition.kind,
            max_attempts=decided.max_attempts,
            max_bytes=opts["MAX_PAYLOAD_BYTES"],
            what=f"{definition.kind}: the payload",
            prepare=prepared(),
            fields=fields,
        )
    object.__setattr__(definition, "_plain", (generation, plain))
    return plain


def _insert_plain(plain: PlainKind, payload: dict[str, Any]) -> Job:
    """`_insert` of a plain job: `payload` must be the caller's own copy."""
    try:
        text = dump_json(payload, what=plain.what, max_bytes=plain.max_bytes)
    except PayloadError as exc:
        raise InvalidPayloadError(str(exc)) from None
    db = connections[DEFAULT_DB_ALIAS]
    raw = raw_cursor(db)
    with db.wrap_database_errors:
        values = (plain.queue, plain.kind, text, plain.max_attempts)
        raw.execute(sql.INSERT_PLAIN_JOB, values, prepare=plain.prepare)
        job_id, created_at = raw.fetchone() or (None, None)
    fields = plain.fields.copy()
    fields["id"] = job_id
    fields["payload"] = payload
    fields["run_at"] = fields["created_at"] = created_at
    fields["labels"] = []
    fields["errors"] = []
    fields["meta"] = {}
    return _make_job(fields, deduplicated=False)


def _constant_fields(decided: KindOptions, kind: str) -> dict[str, Any]:
    """The fields of a newly inserted job that its kind and options decide."""
    return {
        "queue": decided.queue,
        "kind": kind,
        "state": "available",
        "priority": decided.priority,
        "max_attempts": decided.max_attempts,
        "attempt": 0,
        "progress_message": "",
        "rescues": 0,
        "pending_deps": 0,
    }


def _job(row: Row, returned: tuple[Any, ...], *, deduplicated: bool) -> Job:
    """The Job the insert made, without a query."""
    job_id, state, run_at, created_at, _ = returned
    fields = dict.fromkeys(_job_attnames())
    fields.update(_constant_fields(row.decided, row.kind))
    fields["id"] = job_id
    fields["name"] = row.name
    fields["state"] = state
    fields["payload"] = row.payload_value
    fields["dedup_key"] = row.dedup_key
    fields["group_key"] = row.group_key
    fields["labels"] = row.labels
    fields["meta"] = row.meta_value
    fields["run_at"] = run_at
    fields["created_at"] = created_at
    fields["backoff"] = json.loads(row.backoff) if row.backoff else None
    fields["errors"] = []
    return _make_job(fields, deduplicated=deduplicated)


def _make_job(fields: dict[str, Any], *, deduplicated: bool) -> Job:
    """A Job of every field's value (`fields`, which it may keep), as Model.from_db builds
    a loaded row, but with its fields set all at once instead of one setattr each in
    __init__ (a fifth of a single enqueue's Python time)."""
    if signals.pre_init.has_listeners(Job) or signals.post_init.has_listeners(Job):
        names = _job_attnames()
        job = Job.from_db(DEFAULT_DB_ALIAS, list(names), [fields[name] for name in names])
        job.deduplicated = deduplicated  # type: ignore[attr-defined]
        return job
    job = Job.__new__(Job)
    state = fields["_state"] = ModelState()
    state.adding = False
    state.db = DEFAULT_DB_ALIAS
    fields["deduplicated"] = deduplicated
    job.__dict__ = fields
    return job


@functools.cache
def _job_attnames() -> tuple[str, ...]:
    return tuple(f.attname for f in Job._meta.concrete_fields)


def enqueue_many(specs: Iterable[JobSpec]) -> list[int]:
    """Enqueue many jobs in one statement; ids come back in input order.

    A spec whose dedup key is already held (by a live job, or by an earlier spec
    in the same call) gets the holder's id.
    """
    opts = snapshot()
    seen: SeenOptions = {}
    specs = list(specs)

    rows = _each_named(specs, lambda spec: prepare(spec, options=opts, seen=seen))
    if any(spec.dedup_key is not None for spec in specs):
        return insert_rows(list(rows))
    return copy_rows(len(specs), rows)


def enqueue_calls(definition: JobDefinition, calls: Sequence[Call]) -> list[int]:
    """`enqueue_many` for one definition's calls: its options are checked once, and
    each call's payload only for what it decides."""
    opts = snapshot()
    o = definition.options
    decided = kind_options(spec_for(definition, {}), definition, opts)
    kind = definition.kind

    rows = _each_named(
        calls,
        lambda call: build_row(
            decided,
            kind,
            definition.payload_of(call),
            o.dedup_key,
            o.name,
            o.group_key,
            o.meta,
            opts,
        ),
    )
    if o.dedup_key is not None:
        return insert_rows(list(rows))
    return copy_rows(len(calls), rows)


def _each_named[T](items: Iterable[T], make: Callable[[T], Row]) -> Iterator[Row]:
    """`make(item)` for each item in turn; an error names the item (`item_error`)."""
    for index, item in enumerate(items):
        try:
            row = make(item)
        except Exception as exc:
            named = item_error(index, exc)
            if named is exc:
                raise
            raise named from None
        yield row


def item_error(index: int, exc: Exception) -> Exception:
    """`exc`, raised by the item at `index` (0-based) of a bulk enqueue, naming that item:
    a copy with the message prefixed for our own errors and a bad call's TypeError, else
    `exc` itself with a note (what a kind's name or group_key function raised)."""
    message = f"item {index}: {exc}"
    if isinstance(exc, EnqueueError):
        try:
            return type(exc)(message)
        except TypeError:  # a subclass that takes other arguments
            pass
    elif type(exc) is TypeError:
        return TypeError(message)
    exc.add_note(f"raised by item {index} of the bulk enqueue")
    return exc


# Rows a bulk COPY builds and sends at a time: the server stores one chunk while this
# process builds the next.
COPY_CHUNK = 1_000


def copy_rows(count: int, rows: Iterator[Row]) -> list[int]:
    """COPY `count` rows without dedup keys, built as they are sent; ids in input order.

    A row that fails validation part-way aborts the COPY: nothing is written."""
    if not count:
        return []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.ALLOCATE_JOB_IDS, [count])
        now, ids = cursor.fetchone()
        with cursor.cursor.copy(sql.COPY_JOBS) as copy:
            for start in range(0, count, COPY_CHUNK):
                chunk = list(itertools.islice(rows, COPY_CHUNK))
                copy.write(_copy_text(chunk, ids[start : start + len(chunk)], now))
    return list(ids)


# Rows a bulk insert with dedup keys sends per statement: the arrays of a million rows
# in one statement would be held whole, several times over, by both sides.
INSERT_CHUNK = 5_000


def insert_rows(rows: list[Row]) -> list[int]:
    """Insert prepared rows, some with dedup keys, a chunk per statement, in one
    transaction; ids in input order."""
    if not rows:
        return []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.ALLOCATE_JOB_IDS, [len(rows)])
        now, ids = cursor.fetchone()
        inserted: set[int] = set()
        for start in range(0, len(rows), INSERT_CHUNK):
            end = start + INSERT_CHUNK
            inserted |= _insert_unnest(cursor.connection, rows[start:end], ids[start:end], now)
        holders: dict[tuple[str, str | None], int] = {}
        for _ in range(5):
            missing = [
                (row.kind, row.dedup_key)
                for row, i in zip(rows, ids, strict=True)
                if i not in inserted and (row.kind, row.dedup_key) not in holders
            ]
            if not missing:
                return [
                    i if i in inserted else holders[(row.kind, row.dedup_key)]
                    for row, i in zip(rows, ids, strict=True)
                ]
            cursor.execute(
                sql.SELECT_JOB_IDS_BY_DEDUP_KEYS,
                [[k for k, _ in missing], [d for _, d in missing]],
            )
            holders.update(((kind, key), job_id) for kind, key, job_id in cursor.fetchall())
            # A holder that ended between the insert and the lookup left its key free:
            # insert those rows again (each key once: the first row that wants it).
            again = _first_per_key(
                (index, row)
                for index, (row, i) in enumerate(zip(rows, ids, strict=True))
                if i not in inserted and (row.kind, row.dedup_key) not in holders
            )
            if again:
                rows_again, ids_again = [rows[n] for n in again], [ids[n] for n in again]
                inserted |= _insert_unnest(cursor.connection, rows_again, ids_again, now)
                for n in again:
                    if ids[n] in inserted:
                        holders[(rows[n].kind, rows[n].dedup_key)] = ids[n]
        # Inside the transaction: nothing of this call is kept.
        raise EnqueueError("enqueue_many: dedup keys kept changing hands; try again.")


def _insert_unnest(
    conn: psycopg.Connection[Any], rows: list[Row], ids: list[int], now: datetime
) -> set[int]:
    """One INSERT .. ON CONFLICT DO NOTHING of these rows; the ids it inserted."""
    columns = _bulk_columns(rows, ids, now)
    labels = [sql.array_literal(labels) for labels in columns[10]]
    # A server-binding cursor sends the arrays as parameters, not quoted text.
    with psycopg.Cursor(conn) as raw:
        raw.execute(sql.INSERT_JOBS_UNNEST, [*columns[:10], labels, *columns[11:]])
        return {r[0] for r in raw.fetchall()}


def _first_per_key(indexed: Iterable[tuple[int, Row]]) -> list[int]:
    """The index of the first row for each (kind, dedup key)."""
    first: dict[tuple[str, str | None], int] = {}
    for index, row in indexed:
        first.setdefault((row.kind, row.dedup_key), index)
    return sorted(first.values())


def _bulk_columns(rows: list[Row], ids: list[int], now: datetime) -> list[list[Any]]:
    run_ats = [row.starts_at(now) for row in rows]
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
        ["scheduled" if run_at > now else "available" for run_at in run_ats],
    ]


def _copy_text(rows: list[Row], ids: list[int], now: datetime) -> str:
    """The rows as COPY text in COPY_JOBS' columns, written here rather than value by value
    through psycopg's dumpers: a job's line is one f-string, and the columns its kind and
    options decide are written once for all the rows that share them."""
    shared: dict[int, str] = {}
    lines = []
    for job_id, row in zip(ids, rows, strict=True):
        decided = row.decided
        tail = shared.get(id(decided))
        if tail is None:
            tail = shared[id(decided)] = _shared_columns(row, now)
        group_key = row.group_key
        meta = row.meta
        lines.append(
            f"{job_id}\t{_escape(row.name)}\t{_escape(row.payload)}"
            f"\t{'\\N' if group_key is None else _escape(group_key)}"
            f"\t{meta if meta == '{}' else _escape(meta)}\t{tail}\n"
        )
    return "".join(lines)


def _shared_columns(row: Row, now: datetime) -> str:
    """COPY_JOBS' last columns, the same for all rows of one KindOptions."""
    run_at = row.starts_at(now)
    return "\t".join(
        (
            _escape(row.queue),
            _escape(row.kind),
            str(row.priority),
            str(row.max_attempts),
            _escape_null(row.backoff),
            "\\N",  # dedup_key: rows with one are inserted by INSERT_JOBS_UNNEST
            _escape(sql.array_literal(row.labels)),
            str(run_at),
            "scheduled" if run_at > now else "available",
        )
    )


# COPY's text format: backslash, tab, newline and carriage return are escaped, \N is NULL.
_COPY_SPECIAL = re.compile(r"[\\\t\n\r]")
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _escape(text: str) -> str:
    return text if _COPY_SPECIAL.search(text) is None else text.translate(_COPY_ESCAPES)


def _escape_null(text: str | None) -> str:
    return "\\N" if text is None else _escape(text)


class _CallableModule(types.ModuleType):
    """Once this module is imported, the import system makes it the package's attribute
    `enqueue`, hiding the function of that name that `queue_engine.__all__` exports:
    `from queue_engine import enqueue` then finds the module. Calling it enqueues."""

    def __call__(self, spec: JobSpec) -> Job:
        return enqueue(spec)


sys.modules[__name__].__class__ = _CallableModule
