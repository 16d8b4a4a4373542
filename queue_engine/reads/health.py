"""What keeps vacuum from cleaning the live job table: long transactions and their like,
and the dead rows that pile up meanwhile (the overview warns, GET /metrics exports).

Every claim steps over the dead rows of the jobs claimed before it until VACUUM removes
them, and VACUUM removes none that a transaction still open anywhere in the database
might see: one session idle in a transaction for an hour holds back an hour of dead
rows, and the claims slow down the longer it stays."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import connection

from queue_engine import sql
from queue_engine.conf import option

__all__ = ["HorizonHolder", "VacuumHealth", "vacuum_health"]


@dataclass(frozen=True)
class HorizonHolder:
    """A session (or prepared transaction, or replication slot) whose snapshot is old."""

    pid: int | None
    name: str  # the session's application_name, the prepared transaction's gid, the slot's name
    state: str
    age: timedelta | None
    what: str  # "session", "prepared transaction", "replication slot"


@dataclass(frozen=True)
class VacuumHealth:
    holders: list[HorizonHolder]
    dead_rows: int
    live_rows: int

    @property
    def too_many_dead(self) -> bool:
        """More dead rows in the live table than HEALTH_DEAD_ROWS and than live ones."""
        return self.dead_rows >= option("HEALTH_DEAD_ROWS") and self.dead_rows > self.live_rows

    @property
    def oldest(self) -> timedelta:
        ages = [h.age for h in self.holders if h.age is not None]
        return max(ages, default=timedelta(0))

    @property
    def warning(self) -> bool:
        return bool(self.holders) or self.too_many_dead


def vacuum_health() -> VacuumHealth:
    """Holders older than HEALTH_XMIN_AGE seconds, and the live table's row counts."""
    with connection.cursor() as cursor:
        cursor.execute(sql.HORIZON_HOLDERS, {"after": float(option("HEALTH_XMIN_AGE"))})
        holders = [
            HorizonHolder(pid, name or "", state or "", age, what)
            for pid, name, state, age, what in cursor.fetchall()
        ]
        cursor.execute(sql.LIVE_TABLE_ROWS)
        dead, live = cursor.fetchone() or (0, 0)
    return VacuumHealth(holders, int(dead or 0), int(live or 0))
