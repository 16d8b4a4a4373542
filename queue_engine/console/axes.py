"""The charts' vertical axes, fitted to what they show.

Counts go on a linear axis from zero to a round number just above the largest, with
three to five round ticks. Durations go on a logarithmic axis from a round value at or
below the smallest to one at or above the largest: waits and runs span milliseconds to
minutes, and on a linear axis one slow minute flattens every other line against the
floor. Each tick says its value in the unit that fits it (ms, s, min, h, d).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

HEIGHT = 140  # the plot's viewBox height; y grows downwards
FLOOR = 0.0001  # seconds: a duration below it (0.1 ms) is drawn on it
MAX_TICKS = 6

_MINUTE, _HOUR, _DAY = 60, 3600, 86400
# The round durations a log axis may start, end or tick at, in seconds; the majors are
# the ticks kept when all of them would crowd the axis.
_ROUND_DURATIONS = sorted(
    {round(step * 10.0**power, 6) for power in range(-4, 2) for step in (1, 2, 5)}
    | {m * _MINUTE for m in (1, 2, 5, 10, 20, 30)}
    | {h * _HOUR for h in (1, 2, 6, 12)}
    | {d * _DAY for d in (1, 2, 7, 30, 90)}
)
_MAJOR_DURATIONS = {0.0001, 0.001, 0.01, 0.1, 1, 10, _MINUTE, 10 * _MINUTE, _HOUR, _DAY}


@dataclass(frozen=True)
class Tick:
    y: float  # in the plot's viewBox
    label: str

    @property
    def percent(self) -> float:
        """From the plot's top, in percent of its height: where the label goes."""
        return round(self.y / HEIGHT * 100, 2)


@dataclass(frozen=True)
class Axis:
    low: float
    high: float
    log: bool
    ticks: tuple[Tick, ...]

    def y(self, value: float) -> float:
        """Where `value` is drawn: clamped to the axis, so nothing leaves the plot."""
        if self.log:
            value = min(max(value, self.low), self.high)
            span = math.log10(self.high) - math.log10(self.low)
            share = (math.log10(value) - math.log10(self.low)) / span
        else:
            share = (min(max(value, self.low), self.high) - self.low) / (self.high - self.low)
        return round(HEIGHT - share * HEIGHT, 2)


def count_axis(largest: float) -> Axis:
    """From 0 to a round count at or above `largest`, ticked every round step."""
    step = _round_step(max(largest, 1) / 4)
    high = step * math.ceil(max(largest, 1) / step)
    axis = Axis(0, high, False, ())
    values = [step * i for i in range(round(high / step) + 1)]
    return Axis(0, high, False, tuple(Tick(axis.y(v), count_label(v)) for v in values))


def duration_axis(values: Iterable[float]) -> Axis | None:
    """A log axis over these durations (seconds); None when there are none."""
    shown = [max(v, FLOOR) for v in values]
    if not shown:
        return None
    smallest, largest = min(shown), max(shown)
    low = max((d for d in _ROUND_DURATIONS if d <= smallest * 1.0001), default=FLOOR)
    high = min((d for d in _ROUND_DURATIONS if d >= largest * 0.9999), default=largest)
    if high <= low:  # one value, or all alike: a step either side
        index = _ROUND_DURATIONS.index(low)
        low = _ROUND_DURATIONS[max(index - 1, 0)]
        high = _ROUND_DURATIONS[min(index + 1, len(_ROUND_DURATIONS) - 1)]
    marks = [d for d in _ROUND_DURATIONS if low <= d <= high]
    if len(marks) > MAX_TICKS:
        marks = _thin(marks, low, high)
    axis = Axis(low, high, True, ())
    return Axis(low, high, True, tuple(Tick(axis.y(d), duration_label(d)) for d in marks))


def _thin(marks: list[float], low: float, high: float) -> list[float]:
    """Both ends, and the majors between that do not crowd an end's label."""
    span = math.log10(high) - math.log10(low)

    def clear(major: float) -> bool:
        return all(abs(math.log10(major) - math.log10(end)) >= span / 8 for end in (low, high))

    majors = [d for d in marks if d in _MAJOR_DURATIONS and clear(d)]
    while len(majors) > MAX_TICKS - 2:
        majors = majors[::2]
    return [low, *majors, high]


def _round_step(rough: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above `rough`, at least 1."""
    if rough <= 1:
        return 1.0
    power = 10.0 ** math.floor(math.log10(rough))
    return next(s * power for s in (1, 2, 5, 10) if s * power >= rough * 0.9999)


def count_label(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 10_000:
        return f"{value / 1000:g}k"
    return f"{value:,.0f}"


def duration_label(seconds: float) -> str:
    """A round duration in the unit that fits it: 0.5 ms, 20 ms, 2 s, 5 min, 6 h, 7 d."""
    for unit, size in (("d", _DAY), ("h", _HOUR), ("min", _MINUTE), ("s", 1)):
        if seconds >= size:
            return f"{seconds / size:g} {unit}"
    return f"{round(seconds * 1000, 3):g} ms"
