"""The charts' axes: round ticks in units that fit, and every value inside the plot."""

from __future__ import annotations

import pytest

from queue_engine.console.axes import HEIGHT, count_axis, duration_axis, duration_label


def labels(axis: object) -> list[str]:
    return [tick.label for tick in axis.ticks]  # type: ignore[attr-defined]


def test_a_duration_axis_of_milliseconds_reads_in_milliseconds() -> None:
    axis = duration_axis([0.003, 0.012, 0.034])

    assert axis is not None
    assert labels(axis) == ["2 ms", "5 ms", "10 ms", "20 ms", "50 ms"]
    assert axis.y(0.002) == HEIGHT and axis.y(0.05) == 0


def test_a_slow_minute_widens_the_axis_without_flattening_the_milliseconds() -> None:
    axis = duration_axis([0.003, 0.034, 4.2])

    assert axis is not None
    assert labels(axis) == ["2 ms", "10 ms", "100 ms", "1 s", "5 s"]
    # 3 ms and 34 ms sit a fifth of the plot apart, not in the same pixel.
    assert axis.y(0.003) - axis.y(0.034) > HEIGHT / 5


def test_minutes_hours_and_days_read_in_their_own_units() -> None:
    assert labels(duration_axis([70, 250])) == ["1 min", "2 min", "5 min"]  # type: ignore[arg-type]
    assert duration_label(6 * 3600) == "6 h"
    assert duration_label(2 * 86400) == "2 d"
    assert duration_label(0.0005) == "0.5 ms"


def test_one_value_or_none_at_all() -> None:
    single = duration_axis([0.02])

    assert single is not None and labels(single) == ["10 ms", "20 ms", "50 ms"]
    assert duration_axis([]) is None
    assert labels(duration_axis([0.0])) == ["0.1 ms", "0.2 ms"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("largest", "expected"),
    [
        (1, ["0", "1"]),
        (7, ["0", "2", "4", "6", "8"]),
        (34, ["0", "10", "20", "30", "40"]),
        (1234, ["0", "500", "1,000", "1,500"]),
        (48_000, ["0", "20k", "40k", "60k"]),
    ],
)
def test_a_count_axis_starts_at_zero_with_round_steps(largest: int, expected: list[str]) -> None:
    axis = count_axis(largest)

    assert labels(axis) == expected
    assert axis.y(0) == HEIGHT and axis.y(axis.high) == 0 and axis.y(largest) >= 0
