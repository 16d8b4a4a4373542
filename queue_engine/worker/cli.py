from __future__ import annotations

from argparse import ArgumentParser
from typing import Any


def add_arguments(parser: ArgumentParser) -> None:
    parser.add_argument("--queues", default="", help="comma-separated queue names (default: all)")
    parser.add_argument("--concurrency", type=int, default=10)


def run(options: dict[str, Any]) -> None:
    raise SystemExit("runworker is not built yet")
