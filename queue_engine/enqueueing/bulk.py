"""Many jobs in one statement: COPY when nothing can collide, INSERT ... ON CONFLICT with dedup keys."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import psycopg
from django.db import connection, transaction

from queue_engine import sql
from queue_engine.conf import snapshot
from queue_engine.definition.job import (
    Call,
    JobDefinition,
)
from queue_engine.enqueueing.dedup import DEDUP_ATTEMPTS
from queue_engine.enqueueing.hooks import producing
from queue_engine.enqueueing.prepare import (
    JobSpec,
    Row,
    SeenOptions,
    build_row,
    kind_options,
    prepare,
    spec_for,
)
from queue_engine.exceptions import (
    EnqueueError,
)


@producing(lambda specs: "many")
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


@producing(lambda definition, calls: definition.kind)
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

    The first chunk is built before the transaction's first statement, so a batch of up
    to COPY_CHUNK rows holds its transaction open only for its round trips, and its jobs'
    `created_at` (the COPY's start: the column's default is `statement_timestamp()`) does
    not count the rows' building. A row that fails validation part-way aborts the COPY:
    nothing is written."""
    if not count:
        return []
    chunk = list(itertools.islice(rows, COPY_CHUNK))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.ALLOCATE_JOB_IDS, [count])
        now, ids = cursor.fetchone()
        with cursor.cursor.copy(sql.COPY_JOBS) as copy:
            start = 0
            while chunk:
                copy.write(_copy_text(chunk, ids[start : start + len(chunk)], now))
                start += len(chunk)
                chunk = list(itertools.islice(rows, COPY_CHUNK))
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
        for _ in range(DEDUP_ATTEMPTS):
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
