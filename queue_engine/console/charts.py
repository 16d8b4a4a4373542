"""Charts drawn on the server as SVG geometry, from the metrics rollup (`reads.metric_series`).

No chart library: a throughput chart is stacked bars, a latency chart is lines,
both in a fixed viewBox the stylesheet stretches to the panel's width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from queue_engine import reads

WIDTH, HEIGHT = 600, 140
WINDOWS = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


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
    last: float | None


@dataclass
class Chart:
    start: datetime
    end: datetime
    top: float
    bars: list[Bar] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    totals: dict[str, float] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.top <= 0


def _nice(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least `value`."""
    if value <= 0:
        return 0.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= value * 0.9999)


def throughput(series: reads.Series) -> Chart:
    points = series.points
    top = _nice(max((p.succeeded + p.failed + p.cancelled for p in points), default=0))
    chart = Chart(series.start, series.end, top)
    chart.totals = {
        "succeeded": sum(p.succeeded for p in points),
        "failed": sum(p.failed for p in points),
        "cancelled": sum(p.cancelled for p in points),
        "retried": sum(p.retried for p in points),
    }
    if not points or top <= 0:
        return chart
    step = WIDTH / len(points)
    gap = min(1.0, step * 0.15)
    for i, p in enumerate(points):
        base = float(HEIGHT)
        for kind, value in (
            ("succeeded", p.succeeded),
            ("failed", p.failed),
            ("cancelled", p.cancelled),
        ):
            if not value:
                continue
            height = value / top * HEIGHT
            base -= height
            chart.bars.append(
                Bar(
                    round(i * step + gap / 2, 2),
                    round(base, 2),
                    round(step - gap, 2),
                    round(height, 2),
                    kind,
                    f"{p.at:%Y-%m-%d %H:%M} · {value} {kind}",
                )
            )
    return chart


def latency(series: reads.Series) -> Chart:
    points = series.points
    wanted = [
        ("wait_p95", "wait p95"),
        ("wait_p50", "wait p50"),
        ("run_p95", "run p95"),
        ("run_p50", "run p50"),
    ]
    values = [v for p in points for name, _ in wanted if (v := getattr(p, name)) is not None]
    top = _nice(max(values, default=0.0))
    chart = Chart(series.start, series.end, top)
    if not points or top <= 0:
        return chart
    step = WIDTH / len(points)
    for name, label in wanted:
        path: list[str] = []
        pen_down = False
        last = None
        for i, p in enumerate(points):
            value = getattr(p, name)
            if value is None:
                pen_down = False
                continue
            x, y = round(i * step + step / 2, 2), round(HEIGHT - value / top * HEIGHT, 2)
            path.append(f"{'L' if pen_down else 'M'}{x} {y}")
            pen_down = True
            last = value
        chart.lines.append(Line(name.replace("_", "-"), label, " ".join(path), last))
    return chart


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
