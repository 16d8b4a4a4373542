"""The history, partitioned so that retention drops whole tables instead of rows.

Layout (made by migration 0002_sql):

    queue_engine_jobrecord                      PARTITION BY LIST (state)
      queue_engine_jobrecord_<state>            PARTITION BY RANGE (finished_at)
        queue_engine_jobrecord_<state>_<lo>     a leaf: FROM (lo) TO (hi), lo in UTC
        queue_engine_jobrecord_<state>_default  rows no leaf covers

At tens of thousands of jobs a second the history gains billions of rows a day:
deleting them row by row writes as much WAL as inserting them, never keeps up, and
leaves the table bloated for vacuum to chase. Dropping a leaf is a catalog change.

Each state has its own leaves, because each state has its own windows (a week of dead
letters must not keep a day of successes). A state's leaves span a quarter of the
longest window any queue gives that state, on a ladder from a minute to a day
(`QUEUE_ENGINE["HISTORY_PARTITION"]`, in seconds, fixes it instead), and a leaf goes
once its upper bound is older than that window and the metrics rollup has counted it:
a row is kept at least its window and at most one span longer. The leader creates
leaves ahead of the clock (`missing_ranges`) and drops the due ones
(queue_engine.worker.services.partitions).

What partitions cannot do is left to retention's row-by-row collector
(queue_engine.worker.services.retention): a queue whose window is shorter than its
state's longest, and the default leaves (rows written while no leader created leaves,
rows inserted with an old finish time). The ended nodes of a flow still running, which its children still read,
move to the default leaf when their leaf goes, and go with their flow.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from queue_engine import sql
from queue_engine.conf import option
from queue_engine.states import ENDED_STATES

TABLE = "queue_engine_jobrecord"
STATES: tuple[str, ...] = ENDED_STATES
LOGS = "queue_engine_joblog"
LOG = "log"  # the part of the log lines, beside the history's states
PARTS: tuple[str, ...] = (*STATES, LOG)
LADDER = (60, 300, 900, 3600, 6 * 3600, 86400)  # seconds a leaf spans
AHEAD = timedelta(minutes=10)  # leaves exist this far ahead of the clock, and 2 spans
# A new leaf starts this far after the clock, never below it: a row already written
# to the default leaf in its range would make the ATTACH fail.
LEAD = timedelta(seconds=5)
# The model's windows, for a database with no queue and no defaults row yet.
MODEL_WINDOWS = {"succeeded": 86400, "failed": 7 * 86400, "cancelled": 86400}


@dataclass(frozen=True)
class Leaf:
    state: str  # the history's state it holds, or LOG: a leaf of the log lines
    name: str
    lo: datetime
    hi: datetime


def state_table(state: str) -> str:
    """The table a part's leaves are partitions of."""
    return LOGS if state == LOG else f"{TABLE}_{state}"


def default_leaf(state: str) -> str:
    return f"{state_table(state)}_default"


def leaf_name(state: str, lo: datetime) -> str:
    return f"{state_table(state)}_{lo.astimezone(UTC):%Y%m%d_%H%M%S}"


def span_for(longest: int) -> int:
    """Seconds a leaf of a state spans, given the state's longest window."""
    configured = option("HISTORY_PARTITION")
    if configured:
        return int(configured)
    fitting = [s for s in LADDER if s <= longest / 4]
    return fitting[-1] if fitting else LADDER[0]


def longest_windows(rows: Iterable[Sequence[int]]) -> dict[str, int]:
    """Each state's longest window, from HISTORY_WINDOWS' rows, and the longest of all
    for the log lines (LOG), which outlive no job: a job's lines go with it, and those
    left (of a job deleted by an operator, or dropped with its leaf) go with their leaf
    of the log table once the longest window has passed."""
    rows = list(rows)
    windows = (
        {state: max(int(r[i]) for r in rows) for i, state in enumerate(STATES)}
        if rows
        else dict(MODEL_WINDOWS)
    )
    return {**windows, LOG: max(windows.values())}


def leaves_from(rows: Iterable[Sequence[Any]]) -> list[Leaf]:
    """Leaves from HISTORY_LEAVES' rows."""
    return [
        Leaf(LOG if parent == LOGS else parent.removeprefix(f"{TABLE}_"), name, lo, hi)
        for parent, name, lo, hi in rows
    ]


def missing_ranges(
    leaves: Sequence[Leaf], now: datetime, span: int
) -> list[tuple[datetime, datetime]]:
    """The ranges to create so that one state's leaves reach AHEAD (and two spans)
    past `now`: from the last leaf's end, or from just after `now` when there is
    none ahead of the clock. Ends fall on multiples of the span (UTC, from the epoch)."""
    step = timedelta(seconds=span)
    horizon = now + max(AHEAD, 2 * step)
    last = max((leaf.hi for leaf in leaves), default=None)
    start = last if last is not None and last > now + LEAD else now + LEAD
    start = start.astimezone(UTC).replace(microsecond=0)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    ranges = []
    while start < horizon:
        end = epoch + ((start - epoch) // step + 1) * step
        ranges.append((start, end))
        start = end
    return ranges


def oversized(leaves: Iterable[Leaf], now: datetime, span: int) -> list[Leaf]:
    """One state's leaves ahead of the clock that span more than its span now (its
    windows shrank since they were made): empty, they are dropped and made again."""
    step = timedelta(seconds=span)
    return [leaf for leaf in leaves if leaf.lo > now + LEAD and leaf.hi - leaf.lo > step]


def drop_if_empty(leaf: Leaf) -> str:
    """Drop a leaf if it holds no row (one made ahead of the clock)."""
    return (
        f"DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM {leaf.name}) "
        f"THEN DROP TABLE {leaf.name}; END IF; END$$"
    )


def due(
    leaves: Iterable[Leaf], now: datetime, watermark: datetime | None, longest: int
) -> list[Leaf]:
    """One state's leaves whose every row is past the state's longest window and was
    counted by the rollup (its watermark, less the minute it may still re-read)."""
    if watermark is None:
        return []
    cutoff = min(now - timedelta(seconds=longest), watermark - timedelta(minutes=1))
    return [leaf for leaf in leaves if leaf.hi <= cutoff]


def _literal(moment: datetime) -> str:
    return f"'{moment.astimezone(UTC).isoformat()}'"


def create_leaf(state: str, lo: datetime, hi: datetime) -> list[str]:
    """Statements that add one leaf. CREATE TABLE ... PARTITION OF would lock the state's
    table against every settle; ATTACH of a new, empty table only takes a lock that
    lets them write (and an exclusive one on the state's default leaf, which it reads
    to check that no row there belongs to the new range)."""
    name = leaf_name(state, lo)
    template = LOGS if state == LOG else TABLE
    return [
        f"CREATE TABLE {name} (LIKE {template} INCLUDING DEFAULTS INCLUDING STORAGE)",
        f"ALTER TABLE {state_table(state)} ATTACH PARTITION {name} "
        f"FOR VALUES FROM ({_literal(lo)}) TO ({_literal(hi)})",
    ]


def create_leaf_at_once(state: str, lo: datetime, hi: datetime) -> str:
    """create_leaf's statements as one query string, which Postgres runs as one
    transaction even on an autocommit connection: a leader's sweep of orphan leaves
    (ORPHAN_LEAVES) never sees the table made and not yet attached."""
    return ";\n".join(create_leaf(state, lo, hi))


# A flow still running reads its ended nodes (their outputs): those rows move to the
# default leaf when theirs goes.
_RUNNING_FLOW = (
    "r.flow_id IS NOT NULL AND EXISTS (SELECT 1 FROM queue_engine_flow f "
    "WHERE f.id = r.flow_id AND f.state = 'running')"
)


def drop_leaf_steps(leaf: Leaf) -> dict[str, str]:
    """The statements that drop one leaf, run in order in one transaction by the leader.

    `lock` first: no row of the leaf is redriven or changed meanwhile (reads go on).
    Then, when it holds flow nodes (`nodes`), the ended flows whose last nodes are in
    it (`flows`); the log lines and steps of the rows that go (`logs`, `steps`; those
    tables are not partitioned, and only jobs that logged or recorded steps cost
    anything here); the rows that stay copied aside (`keep`, only when `keepers` counts
    any); the leaf detached (`detach`), and the copies written back (`restore`), where
    they land in the state's default leaf as no leaf covers their range any more.
    `drop` runs after that transaction, in one of its own: Postgres frees a dropped
    table's files at commit, which takes tens of milliseconds for a big leaf, and the
    lock on the state's table, which settles write through, is no longer held then."""
    name = leaf.name
    ids = (
        f"BETWEEN (SELECT min(id) FROM {name}) AND (SELECT max(id) FROM {name}) "
        f"AND job_id IN (SELECT r.id FROM {name} r WHERE NOT ({_RUNNING_FLOW}))"
    )
    return {
        "lock": f"LOCK TABLE {name} IN EXCLUSIVE MODE",
        "nodes": f"SELECT EXISTS (SELECT 1 FROM {name} WHERE flow_id IS NOT NULL)",
        "flows": "WITH "
        + sql.emptied_flows(
            f"SELECT DISTINCT flow_id FROM {name} WHERE flow_id IS NOT NULL",
            f"r.tableoid = '{name}'::regclass",
        )
        + " SELECT 1",
        "logs": f"DELETE FROM queue_engine_joblog WHERE job_id {ids}",
        "steps": f"DELETE FROM queue_engine_jobstep WHERE job_id {ids}",
        "keepers": f"SELECT count(*) FROM {name} r WHERE {_RUNNING_FLOW}",
        "keep": (
            "CREATE TEMP TABLE queue_engine_kept ON COMMIT DROP AS "
            f"SELECT r.* FROM {name} r WHERE {_RUNNING_FLOW}"
        ),
        "detach": f"ALTER TABLE {state_table(leaf.state)} DETACH PARTITION {name}",
        "restore": f"INSERT INTO {TABLE} SELECT * FROM queue_engine_kept",
        "drop": f"DROP TABLE {name}",
    }


# Tables named as leaves that are no leaf: detached by a leader that stopped before
# it dropped them.
ORPHAN_LEAVES = rf"""
SELECT relname FROM pg_class
 WHERE relname ~ '^({TABLE}_(succeeded|failed|cancelled)|{LOGS})_[0-9]{{8}}_[0-9]{{6}}$'
   AND relkind = 'r' AND NOT relispartition
   AND relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = '{TABLE}'::regclass)
"""


def plan(cursor: Any) -> tuple[datetime, datetime | None, dict[str, int], list[Leaf]]:
    """The clock, the rollup's watermark, each state's longest window and the leaves,
    read with a DB-API cursor (Django's or psycopg's, sync)."""
    cursor.execute(sql.HISTORY_CLOCK)
    now, watermark = cursor.fetchone()
    cursor.execute(sql.HISTORY_WINDOWS)
    longest = longest_windows(cursor.fetchall())
    cursor.execute(sql.HISTORY_LEAVES)
    return now, watermark, longest, leaves_from(cursor.fetchall())


def ensure_leaves(cursor: Any, parts: Sequence[str] = PARTS) -> int:
    """Create the leaves missing ahead of the clock, with a sync cursor (migrations,
    benches and tests; the leader does the same on its own connection). Returns how
    many it created."""
    now, _, longest, leaves = plan(cursor)
    created = 0
    for state in parts:
        mine = [leaf for leaf in leaves if leaf.state == state]
        for lo, hi in missing_ranges(mine, now, span_for(longest[state])):
            cursor.execute(create_leaf_at_once(state, lo, hi))
            created += 1
    return created


def backfill_leaves(cursor: Any, since: datetime, states: Sequence[str] = STATES) -> list[str]:
    """Create leaves of each state's span from before `since` up to its first leaf
    (for history written with old finish times: imports, benches); the default leaf
    must hold no row of their ranges. Returns their names."""
    _, _, longest, leaves = plan(cursor)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    made: list[str] = []
    for state in states:
        mine = [leaf for leaf in leaves if leaf.state == state]
        end = min((leaf.lo for leaf in mine), default=since)
        step = timedelta(seconds=span_for(longest[state]))
        lo = epoch + ((since - epoch) // step) * step
        while lo < end:
            hi = min(lo + step, end)
            made.append(add_leaf(cursor, state, lo, hi))
            lo = hi
    return made


def add_leaf(cursor: Any, state: str, lo: datetime, hi: datetime) -> str:
    """Create one leaf for a past or future range (benches and tests that write
    history with finish times of their choosing). Returns its name."""
    cursor.execute(create_leaf_at_once(state, lo, hi))
    return leaf_name(state, lo)
