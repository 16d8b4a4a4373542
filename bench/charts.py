"""Per-second series of a load scenario as inline SVG, for the HTML report (no script,
no library: the report is one static file).

A result row with `series` (a list, one per run, of columns keyed by name with a
"second" column) gets one chart per run: jobs per second (enqueued and completed),
milliseconds (p99 pickup latency and the longest gap without a completion, with the
target as a dashed line), and where the series has them (bench.cpu), the CPU in cores
by who spent it and the share of each second a task waited for a CPU. A stall shows as
a dip in the first panel and a spike in the second at the same second.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

WIDTH, PANEL, GAP, LEFT, BOTTOM, LEGEND = 760, 120, 28, 56, 22, 18
COLOURS = {
    "enqueued": "#9aa5b1",
    "completed": "#2b6cb0",
    "p99": "#c05621",
    "gap_ms": "#822727",
    "cpu_busy": "#1a202c",
    "cpu_postgres": "#319795",
    "cpu_workers": "#b7791f",
    "cpu_producer": "#2f855a",
    "cpu_steal": "#e53e3e",
    "cpu_wait_pct": "#805ad5",
}
RUN_PANELS = (
    ("enqueued", "completed"),
    ("p99", "gap_ms"),
    ("cpu_busy", "cpu_postgres", "cpu_workers", "cpu_producer", "cpu_steal"),
    ("cpu_wait_pct",),
)
LABELS = {
    "enqueued": "enqueued/s",
    "completed": "completed/s",
    "p99": "p99 pickup (ms)",
    "gap_ms": "longest gap (ms)",
    "cpu_busy": "CPU busy (cores)",
    "cpu_postgres": "Postgres (cores)",
    "cpu_workers": "workers (cores)",
    "cpu_producer": "producer (cores)",
    "cpu_steal": "steal (cores)",
    "cpu_wait_pct": "waited for a CPU (% of the second)",
}
# A soak's samples (a row's `minutes`): one panel per group, sharing the time axis.
SOAK_PANELS = (
    ("live_mb", "history_mb", "logs_mb", "flows_mb"),
    ("rss_mb",),
    ("completed_per_s",),
    ("p99_ms",),
)
COLOURS.update(
    live_mb="#2b6cb0",
    history_mb="#c05621",
    logs_mb="#2f855a",
    flows_mb="#805ad5",
    rss_mb="#822727",
    completed_per_s="#2b6cb0",
    p99_ms="#c05621",
)
LABELS.update(
    live_mb="live table (MB)",
    history_mb="history (MB)",
    logs_mb="log lines (MB)",
    flows_mb="flows (MB)",
    rss_mb="workers' RSS (MB)",
    completed_per_s="completed/s",
    p99_ms="p99 pickup (ms)",
)


def series_section(results: Sequence[dict[str, Any]]) -> str:
    """An <h2> and the charts of every row that has a series; empty when none has."""
    blocks = []
    for row in results:
        for index, series in enumerate(row.get("series") or []):
            title = f"{row['scenario']} ({row.get('load', '')}, {row.get('rate', '?')} jobs/s), "
            title += f"run {index + 1}"
            blocks.append(f"<h3>{_e(title)}</h3>\n{run_chart(series, row.get('target_value'))}")
    if not blocks:
        return ""
    return "<h2>Per second</h2>\n" + "\n".join(blocks)


def soak_section(results: Sequence[dict[str, Any]]) -> str:
    """An <h2> and one chart per row with a soak's samples; empty when none has."""
    blocks = []
    for row in results:
        minutes = row.get("minutes") or {}
        if minutes.get("minute"):
            title = f"{row['scenario']} ({row.get('rate', '?')} jobs/s)"
            blocks.append(f"<h3>{_e(title)}</h3>\n{soak_chart(minutes)}")
    if not blocks:
        return ""
    return "<h2>Over the run</h2>\n" + "\n".join(blocks)


def soak_chart(samples: dict[str, list[float]]) -> str:
    minutes = samples["minute"]
    panels = []
    for index, keys in enumerate(SOAK_PANELS):
        panels.append(_panel(samples, keys, 4 + index * (PANEL + GAP), minutes, None))
    axis_y = 4 + len(SOAK_PANELS) * (PANEL + GAP) - GAP
    ticks = [
        f'<text x="{_x(m, minutes):.1f}" y="{axis_y + 16}" text-anchor="middle">{m:g} min</text>'
        for m in minutes[:: max(1, len(minutes) // 10)]
    ]
    every = [k for group in SOAK_PANELS for k in group]
    legend = "".join(f'<tspan fill="{COLOURS[k]}">\u25a0 {_e(LABELS[k])}</tspan>  ' for k in every)
    height = axis_y + BOTTOM + 8
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height + 16}" '
        f'font-size="11" font-family="system-ui, sans-serif" role="img">'
        f"{''.join(panels)}{''.join(ticks)}"
        f'<text x="{LEFT}" y="{height + 12}">{legend}</text></svg>'
    )


def run_chart(series: dict[str, list[Any]], target_ms: float | None = None) -> str:
    seconds = series.get("second") or []
    if not seconds:
        return "<p>(no data)</p>"
    drawn = {k for k, values in series.items() if any(v is not None for v in values)}
    panels = [tuple(k for k in keys if k in drawn) for keys in RUN_PANELS]
    panels = [keys for keys in panels if keys]
    parts = []
    for index, keys in enumerate(panels):
        y0 = LEGEND + index * (PANEL + GAP + LEGEND)
        target = target_ms if "p99" in keys else None
        parts.append(_legend(keys, y0 - 6))
        parts.append(_panel(series, keys, y0, seconds, target))
    axis_y = LEGEND + len(panels) * (PANEL + GAP + LEGEND) - GAP - LEGEND
    step = max(1, len(seconds) // 10)
    for s in seconds[::step]:
        x = _x(s, seconds)
        parts.append(f'<text x="{x:.1f}" y="{axis_y + 16}" text-anchor="middle">{s}s</text>')
    height = axis_y + BOTTOM + 8
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-size="11" font-family="system-ui, sans-serif" role="img">'
        f"{''.join(parts)}</svg>"
    )


def _legend(keys: tuple[str, ...], y: float) -> str:
    """A panel's key, above it: one coloured name per line it draws."""
    names = "".join(f'<tspan fill="{COLOURS[k]}">\u25a0 {_e(LABELS[k])}</tspan>  ' for k in keys)
    return f'<text x="{LEFT}" y="{y}">{names}</text>'


def _panel(
    series: dict[str, list[Any]],
    keys: tuple[str, ...],
    y0: float,
    seconds: list[float],
    target: float | None,
) -> str:
    peak = max(
        [v for k in keys for v in series.get(k) or [] if v is not None] + [target or 0.0, 1e-9]
    )
    parts = [
        f'<rect x="{LEFT}" y="{y0}" width="{WIDTH - LEFT - 8}" height="{PANEL}" '
        'fill="none" stroke="#ccc"/>',
        f'<text x="{LEFT - 4}" y="{y0 + 10}" text-anchor="end">{_number(peak)}</text>',
        f'<text x="{LEFT - 4}" y="{y0 + PANEL}" text-anchor="end">0</text>',
    ]
    if target is not None:
        y = y0 + PANEL - PANEL * target / peak
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - 8}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#2f855a" stroke-dasharray="4 3"/>'
        )
    for key in keys:
        values = series.get(key) or []
        points = " ".join(
            f"{_x(s, seconds):.1f},{y0 + PANEL - PANEL * v / peak:.1f}"
            for s, v in zip(seconds, values, strict=False)
            if v is not None
        )
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{COLOURS[key]}" stroke-width="1.2"/>'
        )
    return "".join(parts)


def _x(second: float, seconds: list[float]) -> float:
    span = max(seconds[-1] - seconds[0], 1)
    return LEFT + (WIDTH - LEFT - 8) * (second - seconds[0]) / span


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)
