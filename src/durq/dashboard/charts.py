"""Line charts as geometry for inline SVG, computed on the server: no chart library, no
JavaScript. The template ``_macros.html`` draws a Chart; every text it carries is
escaped there like any other value."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from durq.dashboard.history import Series

__all__ = ["Chart", "Line", "Tick", "format_count", "format_rate", "format_seconds", "line_chart"]

WIDTH = 560
HEIGHT = 180
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 8, 10, 22  # margins for the axis labels


@dataclass(frozen=True)
class Tick:
    """An axis label at a position (pixels)."""

    at: float
    label: str


@dataclass(frozen=True)
class Line:
    """One series: polylines (a gap where values are missing), its legend text and its
    colour slot (``s0``..``s3`` in the stylesheet)."""

    name: str
    slot: int
    segments: list[str]  # SVG "x,y x,y ..." point lists
    last: str  # the latest value, formatted, for the legend


@dataclass(frozen=True)
class Chart:
    """Everything the template needs to draw one chart."""

    title: str
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    lines: list[Line]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    empty: bool


def format_count(value: float) -> str:
    """``1234`` as ``1.2k``, ``3400000`` as ``3.4M``."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f}{unit}".replace(".0" + unit, unit)
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def format_rate(value: float) -> str:
    """A rate per second, compact."""
    return format_count(value) + "/s" if value >= 10 else f"{value:.2g}/s"


def format_seconds(value: float) -> str:
    """A duration: ``850µs``, ``12ms``, ``1.5s``, ``3.2m``, ``1.1h``."""
    if value == 0:
        return "0"
    if value < 0.001:
        return f"{value * 1e6:.0f}µs"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    if value < 120:
        return f"{value:.1f}s"
    if value < 7200:
        return f"{value / 60:.1f}m"
    return f"{value / 3600:.1f}h"


def _nice_step(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 0.25
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0):
        if step * power >= value:
            return step * power
    return 10.0 * power


def line_chart(
    title: str,
    series: Sequence[Series],
    fmt: Callable[[float], str] = format_count,
    now: float | None = None,
    span: float | None = None,
) -> Chart:
    """Lay out ``series`` on shared axes: time across (the last ``span`` seconds, or the
    whole history), values up from zero."""
    times = [t for s in series for t, v in s.points if v is not None]
    values = [v for s in series for _, v in s.points if v is not None]
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    if not times:
        return Chart(title, WIDTH, HEIGHT, _LEFT, _RIGHT, _TOP, _BOTTOM, [], [], [], True)
    end = now if now is not None else max(times)
    start = end - span if span is not None else min(times)
    if end - start < 1:
        start = end - 1
    top = 4 * _nice_step(max(values) / 4)  # four round steps up the y axis

    def x(t: float) -> float:
        return _LEFT + (t - start) / (end - start) * plot_w

    def y(v: float) -> float:
        return _TOP + plot_h - v / top * plot_h

    lines = []
    for slot, s in enumerate(series):
        segments: list[str] = []
        current: list[str] = []
        for t, v in s.points:
            if v is None or t < start:
                if len(current) > 1:
                    segments.append(" ".join(current))
                current = []
                continue
            current.append(f"{x(t):.1f},{y(v):.1f}")
        if len(current) > 1:
            segments.append(" ".join(current))
        elif len(current) == 1:  # a lone point: draw it as a short flat stroke
            px, py = current[0].split(",")
            segments.append(f"{float(px) - 2:.1f},{py} {px},{py}")
        known = [v for _, v in s.points if v is not None]
        lines.append(Line(s.name, slot % 4, segments, fmt(known[-1]) if known else "-"))
    y_ticks = [Tick(y(top * i / 4), fmt(top * i / 4)) for i in range(5)]
    x_ticks = [
        Tick(x(t), time.strftime("%H:%M:%S", time.localtime(t)))
        for t in (start, (start + end) / 2, end)
    ]
    return Chart(title, WIDTH, HEIGHT, _LEFT, _RIGHT, _TOP, _BOTTOM, lines, y_ticks, x_ticks, False)
