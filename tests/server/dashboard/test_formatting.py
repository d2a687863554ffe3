"""How numbers, shapes and identifiers read on the pages."""

from datetime import UTC, datetime, timedelta

from server.dashboard.formatting import (
    ago,
    dims,
    duration_s,
    duration_us,
    percent,
    shapes,
    size,
    target_labels,
    target_name,
    tile_summary,
)
from server.dashboard.tiles import tile_levels


def test_durations():
    assert duration_us(None) == "\u2014"
    assert duration_us(12.345) == "12.3 µs"
    assert duration_us(2500) == "2.5 ms"
    assert duration_us(3_200_000) == "3.2 s"
    assert duration_s(0.25) == "250 ms" and duration_s(3.04) == "3.0 s" and duration_s(125) == "2 min 5 s"


def test_sizes_percentages_and_ages():
    assert size(512) == "512 B" and size(1536) == "1.5 KiB" and size(3 * 1024**3) == "3.0 GiB"
    assert percent(0.934) == "93%" and percent(None) == "\u2014"
    assert ago(datetime.now(UTC) - timedelta(minutes=3)) == "3 min ago"
    assert ago(datetime.now(UTC) - timedelta(days=2, minutes=1)) == "2 d ago"


def test_kernel_columns():
    assert shapes("[[64, 32], [32, 16], [64, 16]]") == "64\u00d732, 32\u00d716 \u2192 64\u00d716"
    assert shapes("not json") == "not json"
    assert dims([]) == "scalar" and dims(None) == "unknown" and dims([1, "batch"]) == "1\u00d7batch"
    assert tile_summary({"block": [32, 64], "thread": [4, 4], "reduce_step": [], "vector": 1}) == \
        "block 32\u00d764 \u00b7 thread 4\u00d74"
    assert target_name("cuda:sm_90:294a3922b7de4fe8") == "cuda:sm_90"
    assert target_name("cpu:x86_64:6934fc2935df5de8") == "cpu:x86_64"
    assert target_name("custom") == "custom"


def test_target_labels_tell_apart_fingerprints_that_read_the_same():
    labels = target_labels(["cpu:x86_64:aaaaaa11", "cpu:x86_64:bbbbbb22", "cuda:sm_90:cc"])
    assert labels == {"cpu:x86_64:aaaaaa11": "cpu:x86_64 (aaaaaa)", "cpu:x86_64:bbbbbb22": "cpu:x86_64 (bbbbbb)",
                      "cuda:sm_90:cc": "cuda:sm_90"}


def test_tile_levels_read_the_decisions_below_the_rtile():
    gemm = {"mk": {"lanes": 8, "rows": 6, "vectors": 2}, "m": 64, "n": 64, "k": 64, "batch": 1, "mc": 64,
            "nc": 64, "kc": 64, "swapped": False, "direct": None,
            "packed": [{"input": 1, "side": "b", "width": 16, "panels": 4, "k": 64, "copies": 1}]}
    rows = {r.field: r for r in tile_levels({"block": [64, 64], "thread": [6, 16], "reduce_step": [64],
                                             "vector": 8, "gemm": gemm}, "cpu:x86-64-v3")}
    assert rows["gemm"].values == "micro-kernel 6 \u00d7 16 \u00b7 mc 64 \u00b7 nc 64 \u00b7 kc 64 \u00b7 packed at load: B"
    launch = {"kind": "gemm", "geometry": {"bm": 64, "bn": 64, "bk": 16, "tm": 4, "tn": 4},
              "grid": [16, 1, 1], "block": [256, 1, 1]}
    row = {r.field: r for r in tile_levels({"block": [64, 64], "launch": launch}, "cuda:sm_90")}["launch"]
    assert row.level == "thread block, grid" and row.values.startswith("gemm \u00b7 grid 16 \u00d7 1 \u00d7 1")
