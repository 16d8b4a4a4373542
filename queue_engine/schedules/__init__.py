"""Recurring jobs: `api` declares schedules (from code or settings); `recurrence` says
when a cron or interval rule fires. An operator's actions on them (enable, disable, run
now, remove) are in `queue_engine.ops`.

    from queue_engine import schedules
    schedules.upsert_cron("nightly-report", "reports.build", cron="0 3 * * *", timezone="Europe/Paris")
"""

from queue_engine.exceptions import ScheduleError
from queue_engine.schedules.api import (
    Declaration,
    ScheduleOptions,
    declaration,
    declare_configured,
    save_declaration,
    upsert_cron,
    upsert_interval,
)

__all__ = [
    "Declaration",
    "ScheduleError",
    "ScheduleOptions",
    "declaration",
    "declare_configured",
    "save_declaration",
    "upsert_cron",
    "upsert_interval",
]
