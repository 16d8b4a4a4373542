from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from jobsite import demo


class Command(BaseCommand):
    help = (
        "Declare the demo schedules and, the first time on this database, seed demo jobs "
        "and flows, so every console page has data and movement. Safe to run again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--seconds-per-row",
            type=float,
            default=1.0,
            help="pace of the slow sales report: seconds between its log lines (default 1)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        pace = options["seconds_per_row"]
        if not 0 <= pace <= 10:
            raise CommandError(f"--seconds-per-row must be from 0 to 10, not {pace}.")
        loaded = demo.load(seconds_per_row=pace)
        if loaded.jobs:
            self.stdout.write(
                f"demo loaded: {loaded.schedules} schedules, {loaded.jobs} jobs and "
                f"{loaded.flows} flows seeded"
            )
        else:
            self.stdout.write(
                f"demo already seeded on this database: {loaded.schedules} schedules checked"
            )
