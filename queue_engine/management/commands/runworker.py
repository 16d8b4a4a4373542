from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Run queue_engine workers."

    def add_arguments(self, parser: CommandParser) -> None:
        from queue_engine.worker.cli import add_arguments

        add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        from queue_engine.worker.cli import run

        run(options)
