"""The hand-written baseline: what a minimal psycopg 3 queue does for the same work.

It has its own minimal table, `bench_baseline_job`, in the benchmark database, with
a claim index, a dedup index and a statement-level trigger that sends one NOTIFY per
queue that got runnable jobs, like queue_engine's. No Django, no validation beyond
`json.dumps`.

The multi-row INSERTs use a RawCursor ($1, $2 ... placeholders): psycopg caches its
parse of a %s query only up to 4 KB, and re-parsing a 3,000-placeholder statement in
Python each time would make the baseline measure psycopg rather than Postgres.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

import psycopg

TABLE = "bench_baseline_job"
BATCH = 1_000

SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_baseline_job (
    id          bigserial PRIMARY KEY,
    queue       varchar(128) NOT NULL DEFAULT 'default',
    kind        varchar(255) NOT NULL,
    payload     jsonb NOT NULL DEFAULT '{}',
    priority    smallint NOT NULL DEFAULT 0,
    state       varchar(16) NOT NULL DEFAULT 'available',
    attempt     integer NOT NULL DEFAULT 0,
    dedup_key   varchar(255),
    run_at      timestamptz NOT NULL DEFAULT now(),
    created_at  timestamptz NOT NULL DEFAULT now(),
    claimed_at  timestamptz  -- set by bench/worker_baseline.py's claim
);
CREATE INDEX IF NOT EXISTS bench_baseline_job_claim
    ON bench_baseline_job (queue, priority DESC, run_at, id) WHERE state = 'available';
CREATE UNIQUE INDEX IF NOT EXISTS bench_baseline_job_dedup
    ON bench_baseline_job (kind, dedup_key) WHERE dedup_key IS NOT NULL;

CREATE OR REPLACE FUNCTION bench_baseline_job_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
BEGIN
    FOR q IN SELECT DISTINCT queue FROM new_rows WHERE state = 'available' LOOP
        PERFORM pg_notify('bench_wake', q);
    END LOOP;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS bench_baseline_job_inserted ON bench_baseline_job;
CREATE TRIGGER bench_baseline_job_inserted
AFTER INSERT ON bench_baseline_job
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION bench_baseline_job_inserted();
"""

INSERT_ONE = (
    "INSERT INTO bench_baseline_job (queue, kind, payload) VALUES (%s, %s, %s) RETURNING id"
)

Payloads = Sequence[dict[str, Any]]


def install(conn: psycopg.Connection[Any]) -> None:
    """Create the baseline table, its indexes and its NOTIFY trigger."""
    conn.execute(SCHEMA)


def insert_each(conn: psycopg.Connection[Any], queue: str, kind: str, payloads: Payloads) -> None:
    """One autocommit INSERT per job (the connection must be in autocommit mode)."""
    with conn.cursor() as cur:
        for payload in payloads:
            cur.execute(INSERT_ONE, (queue, kind, json.dumps(payload)))
            cur.fetchone()


def insert_batched(
    conn: psycopg.Connection[Any], queue: str, kind: str, payloads: Payloads
) -> None:
    """One transaction of multi-row INSERTs of BATCH rows each."""
    with conn.transaction(), psycopg.RawCursor(conn) as cur:
        for chunk in _chunks(payloads, BATCH):
            params = [v for p in chunk for v in (queue, kind, json.dumps(p))]
            cur.execute(_multi_insert(len(chunk), 3, ""), params)


def insert_batched_dedup(
    conn: psycopg.Connection[Any], queue: str, kind: str, payloads: Payloads, keys: Sequence[str]
) -> list[int]:
    """Like `insert_batched`, every row with a dedup key; held keys are skipped."""
    ids: list[int] = []
    rows = list(zip(payloads, keys, strict=True))
    on_conflict = (
        " ON CONFLICT (kind, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING RETURNING id"
    )
    with conn.transaction(), psycopg.RawCursor(conn) as cur:
        for chunk in _chunks(rows, BATCH):
            params = [v for p, k in chunk for v in (queue, kind, json.dumps(p), k)]
            cur.execute(_multi_insert(len(chunk), 4, on_conflict), params)
            ids.extend(row[0] for row in cur.fetchall())
    return ids


@cache
def _multi_insert(rows: int, width: int, suffix: str) -> str:
    columns = "(queue, kind, payload, dedup_key)" if width == 4 else "(queue, kind, payload)"
    values = ", ".join(
        "(" + ", ".join(f"${row * width + col + 1}" for col in range(width)) + ")"
        for row in range(rows)
    )
    return f"INSERT INTO {TABLE} {columns} VALUES {values}{suffix}"


def _chunks[T](items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
