"""Recurring jobs: `api` declares, changes, pauses and triggers schedules; `recurrence`
says when a cron or interval rule fires.

    from queue_engine import schedules
    schedules.upsert_cron("nightly-report", "reports.build", cron="0 3 * * *", timezone="Europe/Paris")
"""

from queue_engine.exceptions import ScheduleError
from queue_engine.schedules.api import (
    Declaration,
    declaration,
    declare_configured,
    disable,
    enable,
    remove_schedule,
    run_now,
    save_declaration,
    upsert_cron,
    upsert_interval,
)

__all__ = [
    "Declaration",
    "ScheduleError",
    "declaration",
    "declare_configured",
    "disable",
    "enable",
    "remove_schedule",
    "run_now",
    "save_declaration",
    "upsert_cron",
    "upsert_interval",
]
