"""Durations as the API takes them: seconds (int or float) or a timedelta."""

from __future__ import annotations

from datetime import timedelta

Seconds = float | int | timedelta


def to_seconds(value: Seconds | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)
