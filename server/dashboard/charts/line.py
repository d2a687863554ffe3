"""Line chart of a rate (0..1) over time."""

from __future__ import annotations

from datetime import UTC, datetime

from markupsafe import Markup

from server.dashboard.charts.scale import LinearScale
from server.dashboard.charts.svg import document, element, empty, number

WIDTH = 1160
HEIGHT = 220
LEFT, RIGHT, TOP, BOTTOM = 44, 16, 12, 30


def rate_over_time(points: list[tuple[datetime, float]], title: str) -> Markup:
    """A line through (time, rate) points, rates drawn as percentages from 0 to 100."""
    if not points:
        return empty(WIDTH, HEIGHT, title, "no finished jobs yet")
    times = [t.timestamp() for t, _ in points]
    lo, hi = min(times), max(times)
    if hi == lo:
        lo, hi = lo - 3600, hi + 3600
    x = LinearScale(lo, hi, LEFT, WIDTH - RIGHT)
    y = LinearScale(0.0, 1.0, HEIGHT - BOTTOM, TOP)
    body = []
    for pct in (0, 25, 50, 75, 100):
        body.append(element("line", x1=LEFT, x2=WIDTH - RIGHT, y1=y(pct / 100), y2=y(pct / 100),
                            class_="chart-grid"))
        body.append(element("text", f"{pct}%", x=LEFT - 6, y=y(pct / 100) + 4, text_anchor="end",
                            class_="chart-tick"))
    for when in _time_ticks(lo, hi):
        body.append(element("text", _time_label(when, hi - lo), x=x(when), y=HEIGHT - 10,
                            text_anchor="middle", class_="chart-tick"))
    path = " ".join(f"{number(x(t))},{number(y(r))}" for t, (_, r) in zip(times, points, strict=True))
    body.append(element("polyline", points=path, class_="chart-line"))
    for t, (when, rate) in zip(times, points, strict=True):
        dot = Markup("").join([
            element("title", f"{when:%Y-%m-%d %H:%M} UTC: {rate:.0%}"),
            element("circle", cx=x(t), cy=y(rate), r=3.5, class_="chart-dot"),
        ])
        body.append(element("g", dot))
    return document(WIDTH, HEIGHT, title, body)


def _time_ticks(lo: float, hi: float) -> list[float]:
    return [lo + (hi - lo) * i / 4 for i in range(5)]


def _time_label(timestamp: float, span: float) -> str:
    when = datetime.fromtimestamp(timestamp, UTC)
    return f"{when:%H:%M}" if span < 2 * 86400 else f"{when:%b %d}"
