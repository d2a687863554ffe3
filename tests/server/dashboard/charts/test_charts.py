"""The SVG charts: well-formed, escaped, and drawing what they are given."""

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from server.dashboard.charts.bars import bar_chart
from server.dashboard.charts.line import rate_over_time
from server.dashboard.charts.scale import LinearScale, LogScale, log_ticks, nice_ticks
from server.dashboard.charts.scatter import ScatterPoint, predicted_vs_measured
from server.dashboard.charts.timeline import stage_timeline

NS = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(str(svg))  # raises on malformed markup


def test_nice_ticks_are_round_and_cover_the_range():
    assert nice_ticks(0, 30, 4) == [0, 10, 20, 30]
    assert nice_ticks(0, 2.6, 5) == [0, 1, 2, 3]
    assert nice_ticks(0, 0.9, 4) == [0, 0.5, 1.0]
    assert nice_ticks(3, 3) == [3]
    assert log_ticks(2.5, 340) == [1.0, 10.0, 100.0, 1000.0]
    assert log_ticks(20, 31) == [20.0, 50.0]  # within a decade: 1-2-5 steps, not 10 .. 100


def test_scales_map_the_domain_onto_pixels():
    assert LinearScale(0, 10, 100, 200)(5) == 150
    assert LinearScale(0, 10, 200, 100)(10) == 100
    assert LogScale(1, 100, 0, 100)(10) == 50


def test_bar_chart_escapes_labels_and_sizes_bars():
    svg = bar_chart([("<script>x</script>", 2), ("Relu", 1)], "ops <b>", hrefs=["", "/?op=Relu&x=1"])
    root = parse(svg)
    assert "<script>" not in str(svg) and "&lt;script&gt;" in str(svg)
    assert root.find(f"{NS}title").text == "ops <b>"
    widths = [float(r.get("width")) for r in root.iter(f"{NS}rect")]
    assert abs(widths[0] - 2 * widths[1]) < 1
    assert [a.get("href") for a in root.iter(f"{NS}a")] == ["/?op=Relu&x=1"]


def test_empty_charts_say_so():
    assert "nothing to show yet" in str(bar_chart([], "t"))
    assert "no finished jobs yet" in str(rate_over_time([], "t"))
    assert "no kernel has both times yet" in str(predicted_vs_measured([ScatterPoint(0, 1, "x")], "t"))
    assert "no stage has finished yet" in str(stage_timeline([], "t"))


def test_rate_over_time_draws_one_dot_per_point():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    root = parse(rate_over_time([(now, 0.0), (now + timedelta(hours=1), 0.5), (now + timedelta(hours=2), 1.0)], "r"))
    dots = list(root.iter(f"{NS}circle"))
    assert len(dots) == 3
    ys = [float(d.get("cy")) for d in dots]
    assert ys[0] > ys[1] > ys[2]  # higher rates are drawn higher up


def test_scatter_puts_agreeing_points_on_the_diagonal():
    root = parse(predicted_vs_measured([ScatterPoint(10, 10, "a", "/kernels/a"), ScatterPoint(1, 100, "<b>")], "s"))
    circles = list(root.iter(f"{NS}circle"))
    on_diagonal = circles[0]
    diagonal = next(line for line in root.iter(f"{NS}line") if line.get("class") == "chart-diagonal")
    x1, y1, x2, y2 = (float(diagonal.get(a)) for a in ("x1", "y1", "x2", "y2"))
    cx, cy = float(on_diagonal.get("cx")), float(on_diagonal.get("cy"))
    assert abs((cy - y1) * (x2 - x1) - (y2 - y1) * (cx - x1)) < 1e-6 * (x2 - x1) ** 2
    assert [a.get("href") for a in root.iter(f"{NS}a")] == ["/kernels/a"]


def test_timeline_bars_follow_each_other():
    root = parse(stage_timeline([("load", 1.0), ("build", 3.0)], "t"))
    rects = list(root.iter(f"{NS}rect"))
    first_end = float(rects[0].get("x")) + float(rects[0].get("width"))
    assert abs(first_end - float(rects[1].get("x"))) < 0.2
    assert float(rects[1].get("width")) > 2.9 * float(rects[0].get("width"))
    assert re.search(r"3\.000 s", str(stage_timeline([("load", 1.0), ("build", 3.0)], "t")))
