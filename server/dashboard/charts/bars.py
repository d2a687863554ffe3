"""Horizontal bar chart: one labelled bar per category (labels may be long, so bars run sideways)."""

from __future__ import annotations

from markupsafe import Markup

from server.dashboard.charts.scale import LinearScale, nice_ticks
from server.dashboard.charts.svg import document, element, empty, label, shorten

WIDTH = 560
ROW = 26
LABEL_WIDTH = 190
TOP = 8
BOTTOM = 26


def bar_chart(items: list[tuple[str, float]], title: str, hrefs: list[str] | None = None) -> Markup:
    """Bars for (category, value) pairs in the given order; `hrefs[i]` links bar i to a page."""
    if not items:
        return empty(WIDTH, 80, title, "nothing to show yet")
    height = TOP + ROW * len(items) + BOTTOM
    ticks = nice_ticks(0, max(v for _, v in items) or 1, 4)
    x = LinearScale(0, ticks[-1], LABEL_WIDTH, WIDTH - 40)
    body = []
    for t in ticks:
        body.append(element("line", x1=x(t), x2=x(t), y1=TOP, y2=height - BOTTOM, class_="chart-grid"))
        body.append(element("text", label(t), x=x(t), y=height - 8, text_anchor="middle",
                            class_="chart-tick"))
    for i, (name, value) in enumerate(items):
        y = TOP + i * ROW
        bar = Markup("").join([
            element("title", f"{name}: {label(value)}"),
            element("rect", x=x(0), y=y + 4, width=max(x(value) - x(0), 1.0), height=ROW - 8,
                    rx=3, class_="chart-bar"),
        ])
        body.append(element("text", shorten(name, 28), x=LABEL_WIDTH - 8, y=y + ROW / 2 + 4,
                            text_anchor="end", class_="chart-label"))
        link = hrefs[i] if hrefs else None
        body.append(element("a", bar, href=link) if link else element("g", bar))
        body.append(element("text", label(value), x=x(value) + 6, y=y + ROW / 2 + 4,
                            class_="chart-value"))
    return document(WIDTH, height, title, body)
