"""A job's stages as a timeline: one row per stage, each bar starting where the previous ended."""

from __future__ import annotations

from markupsafe import Markup

from server.dashboard.charts.scale import LinearScale, nice_ticks
from server.dashboard.charts.svg import document, element, empty, label

WIDTH = 560
ROW = 22
LEFT = 90
TOP = 6
BOTTOM = 26


def stage_timeline(stages: list[tuple[str, float]], title: str) -> Markup:
    """Bars for (stage, seconds) in the order the stages ran."""
    if not stages:
        return empty(WIDTH, 60, title, "no stage has finished yet")
    total = sum(seconds for _, seconds in stages)
    ticks = nice_ticks(0, total or 1, 5)
    x = LinearScale(0, ticks[-1], LEFT, WIDTH - 60)
    height = TOP + ROW * len(stages) + BOTTOM
    body = []
    for t in ticks:
        body.append(element("line", x1=x(t), x2=x(t), y1=TOP, y2=height - BOTTOM, class_="chart-grid"))
        body.append(element("text", f"{label(t)} s", x=x(t), y=height - 8, text_anchor="middle",
                            class_="chart-tick"))
    start = 0.0
    for i, (stage, seconds) in enumerate(stages):
        y = TOP + i * ROW
        body.append(element("text", stage, x=LEFT - 8, y=y + ROW / 2 + 4, text_anchor="end",
                            class_="chart-label"))
        bar = Markup("").join([
            element("title", f"{stage}: {seconds:.3f} s"),
            element("rect", x=x(start), y=y + 4, width=max(x(start + seconds) - x(start), 1.5),
                    height=ROW - 8, rx=2, class_=f"chart-bar stage-{i % 8}"),
        ])
        body.append(element("g", bar))
        body.append(element("text", f"{seconds:.3f} s", x=x(start + seconds) + 6, y=y + ROW / 2 + 4,
                            class_="chart-value"))
        start += seconds
    return document(WIDTH, height, title, body)
