"""Several statements and their transactions sent as one message, run by Postgres back to back.

The settle and the claim used to go out one statement at a time in pipeline mode. Each
statement cost a turn of the event loop, and so did the COMMIT: a claim that took a
capped queue's lock, or a settle that counted down a fan-in's join, held it until the
loop came round to send the COMMIT, while every other claimer waited. As one simple-query
message, `BEGIN; ...; COMMIT` runs and commits at the server's own pace: a lock lives
as long as Postgres takes to run the statements that need it and to commit, never
across a trip to this process.

The statements stay prepared: the message runs `EXECUTE name(literal, ...)` of statements
this connection has prepared (the first message of a connection carries the `PREPARE`).
Their parameters go inline as literals. The hot ones are arrays already written as
Postgres array text, so nothing is lost by not binding them.
"""

from __future__ import annotations

import random
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import pq

from queue_engine import sql


class Prepared:
    """A statement with psycopg placeholders (all `%(name)s`, or all `%s`), as `$n` text."""

    def __init__(self, name: str, statement: str) -> None:
        self.name = name
        text, self.names = sql.numbered(statement)
        if not self.names:
            if "%%" in statement:
                raise ValueError("a literal % is not supported here")
            parts = statement.split("%s")
            text = parts[0] + "".join(f"${i}{part}" for i, part in enumerate(parts[1:], 1))
            self.names = [str(i) for i in range(len(parts) - 1)]
        self.prepare = f"PREPARE {name} AS {text}"

    def execute(self, params: Mapping[str, Any] | Sequence[Any]) -> str:
        if isinstance(params, Mapping):
            values = [params[key] for key in self.names]
        else:
            values = list(params)
        if len(values) != len(self.names):
            raise ValueError(f"{self.name}: {len(self.names)} parameters, {len(values)} given")
        if not values:
            return f"EXECUTE {self.name}"  # `name()` is not valid SQL
        return f"EXECUTE {self.name}({','.join(literal(v) for v in values)})"


def literal(value: Any) -> str:
    """A parameter as an SQL literal, meaning the same whatever standard_conforming_strings
    says (an E'' string, backslashes and quotes escaped)."""
    if value is None:
        return "NULL"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return repr(value)
    if type(value) is float:
        return f"'{value!r}'"  # quoted: nan and inf are only valid as strings
    if isinstance(value, list | tuple):
        value = sql.array_literal(value)
    text = str(value)
    if "\x00" in text:  # the message would end there: refused as a bound value would be
        raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    if "\\" in text or "'" in text:
        return "E'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "'" + text + "'"


# A lane plans each statement once (sql.LANE_SETTINGS force the generic
# plan), and a generic plan keeps what the statistics said when it was made. Made while
# a table was nearly empty, it can be wrong for good: planned with one row in the
# history, the claim read a whole (kind, id) index to find each flow parent's output.
# So a connection's statements are planned again now and then, on a widening schedule
# (REPLAN_FIRST seconds after its first plans, then twice as long each time, up to
# REPLAN_MAX): the message that finds its plans due starts with DEALLOCATE ALL and
# prepares what it runs again. Some twenty plans a connection, once in minutes. Each
# wait is drawn within REPLAN_JITTER of its length: planning them takes a lane tens of
# milliseconds, and the lanes of a fleet started together would otherwise all plan at
# the same moment and stop claiming together.
REPLAN_FIRST = 10.0
REPLAN_MAX = 600.0
REPLAN_JITTER = 0.25


def _replan_wait(interval: float) -> float:
    return interval * random.uniform(1 - REPLAN_JITTER, 1 + REPLAN_JITTER)


@dataclass
class _Plans:
    interval: float  # the schedule's current step
    wait: float  # until the next plans: the step, give or take REPLAN_JITTER
    names: set[str] = field(default_factory=set)  # prepared on this connection
    planned_at: float = field(default_factory=time.monotonic)


_plans_on: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], _Plans] = (
    weakref.WeakKeyDictionary()
)


class Script:
    """Statements collected for one message; `run` sends them, then `rowcount(place)` and
    `rows(place)` read what the statement `add` placed there returned.
    """

    def __init__(self) -> None:
        self._steps: list[str | tuple[Prepared, Any]] = []
        self._rowcounts: dict[int, int] = {}
        self._rows: dict[int, list[tuple[Any, ...]]] = {}
        self._want_rows: set[int] = set()

    def raw(self, statement: str) -> int:
        self._steps.append(statement)
        return len(self._steps) - 1

    def add(
        self, statement: Prepared, params: Mapping[str, Any] | Sequence[Any], *, rows: bool = False
    ) -> int:
        self._steps.append((statement, params))
        place = len(self._steps) - 1
        if rows:
            self._want_rows.add(place)
        return place

    def rowcount(self, place: int) -> int:
        return self._rowcounts[place]

    def rows(self, place: int) -> list[tuple[Any, ...]]:
        return self._rows[place]

    async def run(self, conn: psycopg.AsyncConnection[Any]) -> None:
        plans = _plans_on.get(conn)
        if plans is None:
            plans = _plans_on[conn] = _Plans(REPLAN_FIRST, _replan_wait(REPLAN_FIRST))
        prepared = plans.names
        parts: list[str] = []
        places: list[int | None] = []  # for each part, its step (None: a PREPARE)
        if prepared and time.monotonic() - plans.planned_at >= plans.wait:
            parts.append("DEALLOCATE ALL")
            places.append(None)
            prepared.clear()
            plans.planned_at = time.monotonic()
            plans.interval = min(plans.interval * 2, REPLAN_MAX)
            plans.wait = _replan_wait(plans.interval)
        for place, step in enumerate(self._steps):
            if isinstance(step, str):
                parts.append(step)
            else:
                statement, params = step
                if statement.name not in prepared:
                    parts.append(statement.prepare)
                    places.append(None)
                    prepared.add(statement.name)
                parts.append(statement.execute(params))
            places.append(place)
        cursor = conn.cursor()
        try:
            # Each ; on a line of its own: a statement's last line may be a -- comment.
            # prepare=False: psycopg must never try to prepare the message itself.
            await cursor.execute("\n;\n".join(parts).encode(), prepare=False)
        except BaseException:
            prepared.clear()  # which PREPAREs ran is unknown: start again from none
            if not conn.closed and not conn.broken:
                # prepare=False: a DEALLOCATE ALL that psycopg had prepared (it does so
                # from a statement's sixth run) would drop itself from under psycopg.
                if conn.info.transaction_status == pq.TransactionStatus.INERROR:
                    await conn.execute("ROLLBACK", prepare=False)
                await conn.execute("DEALLOCATE ALL", prepare=False)
            raise
        for i, at in enumerate(places):
            if i:
                cursor.nextset()
            if at is None:
                continue
            self._rowcounts[at] = cursor.rowcount
            if at in self._want_rows:
                self._rows[at] = await cursor.fetchall()
