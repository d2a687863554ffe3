"""Predicted vs measured kernel time, log-log, with the line where the two agree."""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from server.dashboard.charts.scale import LogScale, log_ticks
from server.dashboard.charts.svg import document, element, empty, label

SIZE = 320
LEFT, RIGHT, TOP, BOTTOM = 52, 14, 12, 40


@dataclass(frozen=True)
class ScatterPoint:
    """One kernel: its predicted and measured time (µs), a tooltip and where it links to."""

    predicted: float
    measured: float
    tooltip: str
    href: str | None = None


def predicted_vs_measured(points: list[ScatterPoint], title: str) -> Markup:
    """Dots at (predicted, measured); dots above the diagonal ran slower than predicted."""
    usable = [p for p in points if p.predicted > 0 and p.measured > 0]
    if not usable:
        return empty(SIZE + 60, SIZE, title, "no kernel has both times yet")
    values = [v for p in usable for v in (p.predicted, p.measured)]
    ticks = log_ticks(min(values), max(values))
    x = LogScale(ticks[0], ticks[-1], LEFT, SIZE + 60 - RIGHT)
    y = LogScale(ticks[0], ticks[-1], SIZE - BOTTOM, TOP)
    body = []
    for t in ticks:
        body.append(element("line", x1=x(t), x2=x(t), y1=TOP, y2=SIZE - BOTTOM, class_="chart-grid"))
        body.append(element("line", x1=LEFT, x2=SIZE + 60 - RIGHT, y1=y(t), y2=y(t), class_="chart-grid"))
        body.append(element("text", label(t), x=x(t), y=SIZE - BOTTOM + 16, text_anchor="middle",
                            class_="chart-tick"))
        body.append(element("text", label(t), x=LEFT - 6, y=y(t) + 4, text_anchor="end",
                            class_="chart-tick"))
    body.append(element("line", x1=x(ticks[0]), y1=y(ticks[0]), x2=x(ticks[-1]), y2=y(ticks[-1]),
                        class_="chart-diagonal"))
    body.append(element("text", "predicted (µs)", x=(LEFT + SIZE + 60 - RIGHT) / 2, y=SIZE - 6,
                        text_anchor="middle", class_="chart-axis-label"))
    body.append(element("text", "measured (µs)", x=14, y=(TOP + SIZE - BOTTOM) / 2,
                        text_anchor="middle", class_="chart-axis-label",
                        transform=f"rotate(-90 14 {(TOP + SIZE - BOTTOM) / 2})"))
    for p in usable:
        dot = Markup("").join([
            element("title", f"{p.tooltip}: predicted {label(p.predicted)} µs, measured {label(p.measured)} µs"),
            element("circle", cx=x(p.predicted), cy=y(p.measured), r=4, class_="chart-dot"),
        ])
        body.append(element("a", dot, href=p.href) if p.href else element("g", dot))
    return document(SIZE + 60, SIZE, title, body)
