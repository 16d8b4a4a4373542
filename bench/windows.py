"""Starts counted by window, as a rate limit counts them: shared by the rate_limit
scenario and the rate-limit tests, which check the same bound."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime


def most_in_a_window(starts: Iterable[datetime], window: float) -> int:
    """The most starts in any window of `window` seconds, sliding over the starts."""
    ordered = sorted(starts)
    most, first = 0, 0
    for last, start in enumerate(ordered):
        while (start - ordered[first]).total_seconds() >= window:
            first += 1
        most = max(most, last - first + 1)
    return most
