"""worker/script.py: statements sent as one message, against a real Postgres."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from queue_engine import sql
from queue_engine.sql.claim import LANE_SETTINGS
from queue_engine.worker.script import Prepared, Script, literal

ECHO = Prepared(
    "test_echo",
    "SELECT %(text)s::text, %(n)s::int, %(flag)s::boolean\n-- a last line that is a comment",
)
FLOATS = Prepared("test_floats", "SELECT %s::float8, %s::float8, %s::float8[]")
ARRAY = Prepared("test_array", "SELECT unnest(%s::text[])")
FAIL = Prepared("test_fail", "SELECT 1 / %(zero)s::int")

AWKWARD = "quote ' double \" backslash \\ E'x' \\' {braces,comma} NULL \\N tab\t line\n é ✓ $1 %s"


def run(conninfo: str, build: Any) -> Any:
    async def main() -> Any:
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        try:
            return await build(conn)
        finally:
            await conn.close()

    return asyncio.run(main())


def test_parameters_arrive_as_sent_and_results_keep_their_places(conninfo: str) -> None:
    async def build(conn: psycopg.AsyncConnection) -> Any:
        script = Script()
        script.raw("BEGIN")
        first = script.add(ECHO, {"text": AWKWARD, "n": -7, "flag": False}, rows=True)
        second = script.add(ARRAY, [[AWKWARD, None, "NULL", ""]], rows=True)
        script.raw("COMMIT")
        again = script.add(ECHO, {"text": None, "n": 0, "flag": True}, rows=True)
        floats = script.add(FLOATS, [0.25, float("inf"), [1.5, float("nan"), None]], rows=True)
        await script.run(conn)
        return (
            script.rows(first),
            script.rows(second),
            script.rows(again),
            script.rowcount(second),
            script.rows(floats),
        )

    first, second, again, count, floats = run(conninfo, build)

    assert first == [(AWKWARD, -7, False)]
    assert second == [(AWKWARD,), (None,), ("NULL",), ("",)]
    assert again == [(None, 0, True)]
    assert count == 4
    ((small, infinite, array),) = floats
    assert (small, infinite) == (0.25, float("inf"))
    assert array[0] == 1.5 and array[1] != array[1] and array[2] is None  # nan != nan


def test_a_failing_statement_rolls_back_its_transaction_and_the_connection_goes_on(
    conninfo: str,
) -> None:
    async def build(conn: psycopg.AsyncConnection) -> Any:
        await conn.execute("CREATE TEMP TABLE t (x int)")
        insert = Prepared("test_insert", "INSERT INTO t VALUES (%(x)s::int)")
        script = Script()
        script.raw("BEGIN")
        script.add(insert, {"x": 1})
        script.add(FAIL, {"zero": 0})
        script.raw("COMMIT")
        with pytest.raises(psycopg.errors.DivisionByZero):
            await script.run(conn)
        status = conn.info.transaction_status
        # The statements are prepared again on the next message (the failed one may
        # have stopped before its PREPAREs ran, or after).
        script = Script()
        script.raw("BEGIN")
        script.add(insert, {"x": 2})
        script.raw("COMMIT")
        echo = script.add(ECHO, {"text": "ok", "n": 1, "flag": True}, rows=True)
        await script.run(conn)
        cur = await conn.execute("SELECT x FROM t")
        return status, await cur.fetchall(), script.rows(echo)

    status, rows, echo = run(conninfo, build)

    assert status == psycopg.pq.TransactionStatus.IDLE
    assert rows == [(2,)]  # the failed transaction's insert is gone
    assert echo == [("ok", 1, True)]


def test_a_statement_failing_again_and_again_raises_its_own_error_each_time(
    conninfo: str,
) -> None:
    """After a failure the script forgets its prepared statements (DEALLOCATE ALL). Run
    through psycopg's own statement cache, that DEALLOCATE was prepared too from its
    sixth run on, dropped itself, and the next failure raised `prepared statement
    "_pg3_0" does not exist` instead of the handler's error."""

    async def build(conn: psycopg.AsyncConnection) -> list[type[BaseException]]:
        raised: list[type[BaseException]] = []
        for _ in range(10):
            script = Script()
            script.raw("BEGIN")
            script.add(FAIL, {"zero": 0})
            script.raw("COMMIT")
            try:
                await script.run(conn)
            except psycopg.Error as exc:
                raised.append(type(exc))
        return raised

    assert run(conninfo, build) == [psycopg.errors.DivisionByZero] * 10


def test_literals_mean_the_same_whatever_standard_conforming_strings_says(
    conninfo: str,
) -> None:
    async def build(conn: psycopg.AsyncConnection) -> Any:
        out = []
        for setting in ("on", "off"):
            await conn.execute(f"SET standard_conforming_strings = {setting}")
            cur = await conn.execute(f"SELECT {literal(AWKWARD)}::text")  # type: ignore[arg-type]
            out.append((await cur.fetchone())[0])  # type: ignore[index]
        return out

    assert run(conninfo, build) == [AWKWARD, AWKWARD]


def test_a_connections_statements_are_planned_again_on_a_widening_schedule(
    conninfo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generic plan made while a table was nearly empty must not last as long as the
    connection: once REPLAN_FIRST has passed, the next message prepares its statements
    again (then after twice as long, and so on)."""
    from queue_engine.worker import script

    monkeypatch.setattr(script, "REPLAN_FIRST", 0.2)
    monkeypatch.setattr(script, "REPLAN_JITTER", 0.0)

    async def build(conn: psycopg.AsyncConnection) -> Any:
        async def prepared_at() -> Any:
            s = Script()
            s.add(ECHO, {"text": "x", "n": 1, "flag": True}, rows=True)
            await s.run(conn)
            cur = await conn.execute(
                "SELECT prepare_time FROM pg_prepared_statements WHERE name = 'test_echo'"
            )
            return (await cur.fetchone())[0]  # type: ignore[index]

        first = await prepared_at()
        soon = await prepared_at()
        await asyncio.sleep(0.25)
        due = await prepared_at()
        await asyncio.sleep(0.25)  # the next plans are due after 0.4 s, not 0.2
        not_yet = await prepared_at()
        await asyncio.sleep(0.2)
        later = await prepared_at()
        return first, soon, due, not_yet, later

    first, soon, due, not_yet, later = run(conninfo, build)

    assert soon == first
    assert due > first
    assert not_yet == due
    assert later > due


def test_placeholders_become_numbered_parameters() -> None:
    named = Prepared("n", "SELECT %(a)s, %(b)s, %(a)s")
    positional = Prepared("p", "SELECT %s, %s")

    assert named.prepare == "PREPARE n AS SELECT $1, $2, $1"
    assert named.execute({"b": 2, "a": "x"}) == "EXECUTE n('x',2)"
    assert positional.prepare == "PREPARE p AS SELECT $1, $2"
    with pytest.raises(ValueError, match="2 parameters, 1 given"):
        positional.execute([1])
    with pytest.raises(ValueError, match="literal %"):
        Prepared("bad", "SELECT 'a%%'")


@pytest.mark.parametrize("statistics", ["none", "stale"])
def test_the_claim_reads_flow_edges_by_index_when_planned_on_an_empty_edge_table(
    conninfo: str, statistics: str
) -> None:
    """The claim's generic plan lives as long as the worker's connection: one made before
    the first flow must still look a claimed node's parents up by index, not read every
    edge for every node (LANE_SETTINGS). "stale": ANALYZE of an empty table keeps the
    statistics it found last, here of a fan-in from one parent, under which Postgres 18
    once preferred a skip scan of the (parent_id, child_id) index (migration 0011)."""
    claim = Prepared("test_claim", sql.CLAIM)
    params = {
        **sql.NO_FLOORS,
        "all_queues": True,
        "queues": [],
        "labels": [],
        "limit": 10,
        "alone": False,
        "worker": "w",
        "token": 1,
    }
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for setting in LANE_SETTINGS:
            conn.execute(setting)
        if statistics == "stale":
            conn.execute(
                "INSERT INTO queue_engine_flowedge (flow_id, parent_id, child_id)"
                " SELECT 1, 7, g FROM generate_series(8, 57) g"
            )
            conn.execute("ANALYZE queue_engine_flowedge")
            conn.execute("DELETE FROM queue_engine_flowedge")
            conn.execute("VACUUM queue_engine_flowedge")
        conn.execute("ANALYZE queue_engine_flowedge")
        assert conn.execute("SELECT count(*) FROM queue_engine_flowedge").fetchone() == (0,)
        with conn.transaction(force_rollback=True):
            for setting in sql.CLAIM_SETTINGS:
                conn.execute(setting)
            conn.execute(claim.prepare)
            plan = "\n".join(
                row[0] for row in conn.execute("EXPLAIN " + claim.execute(params)).fetchall()
            )

    assert "Seq Scan on queue_engine_flowedge" not in plan, plan
    edges = [line.strip() for line in plan.splitlines() if "queue_engine_flowedge" in line]
    assert edges and all("qe_edge_child_parents" in line for line in edges), edges


BATCH = list(range(1, 101))
SETTLES: dict[str, tuple[str, dict[str, Any]]] = {
    "succeeded": (sql.SETTLE_SUCCEEDED, {"results": ["{}"] * 100}),
    "succeeded_flow": (sql.SETTLE_SUCCEEDED_FLOW, {"results": ["{}"] * 100, "chunk": 1000}),
    "failed": (sql.SETTLE_FAILED, {"errors": ["{}"] * 100}),
    "retry": (sql.SETTLE_RETRY, {"delays": [0.0] * 100, "errors": ["{}"] * 100}),
    "snoozed": (sql.SETTLE_SNOOZED, {"delays": [0.0] * 100, "payloads": [None] * 100}),
    "release": (sql.RELEASE, {}),
    "progress": (sql.PROGRESS, {"fractions": [0.5] * 100, "messages": [""] * 100}),
}


@pytest.mark.parametrize("name", sorted(SETTLES))
def test_settles_look_their_batch_up_by_id_when_planned_on_an_empty_table(
    conninfo: str, name: str
) -> None:
    """A lane plans each statement once (LANE_SETTINGS); a settle's plan must find its
    rows by id whatever the statistics said then, not walk every running job once for
    each job of the batch."""
    text, extra = SETTLES[name]
    statement = Prepared(f"test_settle_{name}", text)
    params = {"ids": BATCH, "tokens": BATCH, **extra}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for setting in LANE_SETTINGS:
            conn.execute(setting)
        with conn.transaction(force_rollback=True):
            conn.execute("DELETE FROM queue_engine_job")
            conn.execute("ANALYZE queue_engine_job")
            conn.execute(statement.prepare)
            plan = "\n".join(
                row[0] for row in conn.execute("EXPLAIN " + statement.execute(params)).fetchall()
            )

    # Each row's token and values come from the arrays at its position: the job table
    # is read once, by id (or among running jobs), never joined against the batch.
    done = plan.split("  CTE Scan on done")[0].split("CTE releasing")[0]
    assert "Function Scan" not in done and "Join" not in done and "Loop" not in done, plan
    assert "id = ANY" in done, plan
