"""Charts drawn on the server as SVG geometry, from the metrics rollup (`reads.metric_series`).

No chart library: a throughput chart is stacked bars, a latency chart is lines, both in
a fixed viewBox the stylesheet stretches to the panel's width, on an axis fitted to
what they show (`axes`). The page's live socket swaps a new drawing in as it is, and
with no script the charts read the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from queue_engine import reads
from queue_engine.console.axes import Axis, count_axis, duration_axis

WIDTH = 600
WINDOWS = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
OUTCOMES = ("succeeded", "failed", "cancelled")


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    kind: str
    title: str


@dataclass
class Line:
    kind: str
    label: str
    path: str
    dots: str
    last: float | None


@dataclass
class Chart:
    start: datetime
    end: datetime
    step: timedelta
    axis: Axis | None  # None: nothing to draw in this window
    bars: list[Bar] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    totals: dict[str, float] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.axis is None


def throughput(series: reads.Series) -> Chart:
    """Jobs ended per step, stacked by outcome, and the failed attempts that ran again as
    a line on the same scale."""
    points = series.points
    chart = Chart(series.start, series.end, series.step, None)
    chart.totals = {name: sum(getattr(p, name) for p in points) for name in (*OUTCOMES, "retried")}
    largest = max((max(p.ended, p.retried) for p in points), default=0)
    if largest <= 0:
        return chart
    axis = chart.axis = count_axis(largest)
    step = WIDTH / len(points)
    gap = min(1.0, step * 0.15)
    for i, p in enumerate(points):
        below = 0
        for kind in OUTCOMES:
            value = getattr(p, kind)
            if not value:
                continue
            top, base = axis.y(below + value), axis.y(below)
            below += value
            chart.bars.append(
                Bar(
                    round(i * step + gap / 2, 2),
                    top,
                    round(step - gap, 2),
                    round(base - top, 2),
                    kind,
                    f"{p.at:%Y-%m-%d %H:%M} · {value} {'dead' if kind == 'failed' else kind}",
                )
            )
    if chart.totals["retried"]:
        # Only where attempts were retried: a dashed line along zero would hide the floor.
        retried = [p.retried or None for p in points]
        chart.lines.append(_line(retried, "retried", "retried attempts", axis, step))
    return chart


def latency(series: reads.Series) -> Chart:
    """Wait (due to started) and run (started to finished) percentiles per step."""
    points = series.points
    wanted = [
        ("wait_p95", "wait p95"),
        ("wait_p50", "wait p50"),
        ("run_p95", "run p95"),
        ("run_p50", "run p50"),
    ]
    values = [v for p in points for name, _ in wanted if (v := getattr(p, name)) is not None]
    chart = Chart(series.start, series.end, series.step, duration_axis(values))
    if chart.axis is None:
        return chart
    step = WIDTH / len(points)
    chart.lines = [
        _line([getattr(p, name) for p in points], name, label, chart.axis, step)
        for name, label in wanted
    ]
    return chart


def _line(values: Sequence[float | None], name: str, label: str, axis: Axis, step: float) -> Line:
    """A path through each step's value, broken where a step has none; a value with no
    neighbour on either side goes in `dots` (a zero-length segment, drawn as a round cap)."""
    runs: list[list[tuple[float, float]]] = [[]]
    last = None
    for i, value in enumerate(values):
        if value is None:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((round(i * step + step / 2, 2), axis.y(value)))
        last = value
    path = " ".join(
        " ".join(f"{'L' if j else 'M'}{x} {y}" for j, (x, y) in enumerate(run))
        for run in runs
        if len(run) > 1
    )
    dots = " ".join(f"M{x} {y} L{x} {y}" for run in runs if len(run) == 1 for x, y in run)
    return Line(name.replace("_", "-"), label, path, dots, last)


def queue_charts(queue: str, window: str) -> tuple[Chart, Chart]:
    series = reads.metric_series(WINDOWS[window], queue=queue)
    return throughput(series), latency(series)


def sparkline_points(
    values: list[int], width: float = 120, height: float = 24, top: int | None = None
) -> str:
    """An SVG polyline's points for a small trend line (scaled to `top`, else its max)."""
    if not values:
        return ""
    top = top or max(values) or 1
    step = width / max(len(values) - 1, 1)
    return " ".join(
        f"{round(i * step, 1)},{round(height - v / top * (height - 2) - 1, 1)}"
        for i, v in enumerate(values)
    )


@dataclass
class Trend:
    points: str  # jobs ended per step
    ended: int
    failed: int
    failed_points: str = ""  # dead jobs per step, on the same scale; "" when none died


def queue_trends(queues: list[str], window: timedelta = timedelta(hours=1)) -> dict[str, Trend]:
    """Per queue: what ended over the last hour, step by step, for the overview's sparklines."""
    trends = {}
    for queue, series in reads.queue_series(window, queues).items():
        ended = [p.ended for p in series.points]
        failed = [p.failed for p in series.points]
        trends[queue] = Trend(
            sparkline_points(ended),
            sum(ended),
            sum(failed),
            sparkline_points(failed, top=max(ended, default=0)) if any(failed) else "",
        )
    return trends
