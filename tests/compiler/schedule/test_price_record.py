"""The cost model's prices kept beside the kernels (compiler/schedule/tilegraph/price_record.py):
a model compiled again prices its connections from the record, to the same plan; a record is
the model's and the whole target's; one that cannot be read is a miss, not an error."""

from __future__ import annotations

import dataclasses

import pytest

import compiler.pipeline as pipeline
from compiler.backends.c import CBackend
from compiler.cache import KernelEntry, MemoryKernelCache
from compiler.pipeline import CompileResult, compile_model
from compiler.schedule.tilegraph import pricing
from compiler.schedule.tilegraph.price_record import PRICES_PATTERN
from compiler.target import get_target
from compiler.target.base import Target
from tests.compiler.schedule.test_fusion_groups import dense_softmax


class PricedBackend(CBackend):
    """The C backend with every connection priced (none too light to ask the model about)."""

    measure_threshold_us = 0.0


@pytest.fixture(autouse=True)
def priced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "backend_for", lambda target: PricedBackend())


def _compile(tmp_path, name: str, cache: MemoryKernelCache, target: str | Target = "cpu") -> CompileResult:
    return compile_model(dense_softmax(), target, {"threads": 2, "measure": False}, cache=cache,
                         output=tmp_path / f"{name}.tar.gz")


def _records(cache: MemoryKernelCache) -> list[KernelEntry]:
    return [e for e in cache.entries().values() if e.signature.op_pattern == PRICES_PATTERN]


def _no_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("an estimate the record holds was constructed again")

    monkeypatch.setattr(pricing, "construct", refuse)


def test_a_second_compile_prices_from_the_record_to_the_same_plan(monkeypatch, tmp_path) -> None:
    cache = MemoryKernelCache()
    first = _compile(tmp_path, "a", cache)
    assert first.validation["passed"] is True and len(_records(cache)) == 1
    assert any(g["predicted_fused_us"] for g in first.report["fusion"]["groups"])  # the model was asked
    _no_construction(monkeypatch)
    for analysis in ("kernel_work", "dram_bytes"):  # the report's figures of each kernel come from the record too
        monkeypatch.setattr(pipeline, analysis, lambda *a, **kw: pytest.fail("a kernel's figures were made again"))
    second = _compile(tmp_path, "b", cache)
    assert second.validation["passed"] is True and second.cache_misses == 0
    assert [k["key"] for k in second.kernels] == [k["key"] for k in first.kernels]
    assert second.report["fusion"] == first.report["fusion"]  # the same prices, groups and DRAM bytes
    assert len(_records(cache)) == 1  # nothing new was priced, so nothing new is kept


def test_a_target_with_another_peak_is_priced_again(monkeypatch, tmp_path) -> None:
    """The kernels' key holds what changes code; the prices also follow the target's
    numbers (`tileforge targets --measure` replaces them), so they are the record's key."""
    cache = MemoryKernelCache()
    _compile(tmp_path, "a", cache)
    host = get_target("cpu")
    slower = dataclasses.replace(host, peak_flops={k: v / 2 for k, v in host.peak_flops.items()})
    assert slower.fingerprint() == host.fingerprint()
    constructed = []
    real = pricing.construct
    monkeypatch.setattr(pricing, "construct", lambda *a, **kw: constructed.append(1) or real(*a, **kw))
    again = _compile(tmp_path, "b", cache, slower)
    assert again.validation["passed"] is True and constructed and len(_records(cache)) == 2


def test_a_record_that_cannot_be_read_is_a_miss(tmp_path) -> None:
    cache = MemoryKernelCache()
    first = _compile(tmp_path, "a", cache)
    (record,) = _records(cache)
    damaged = MemoryKernelCache()
    damaged.put(dataclasses.replace(record, binary=b"{not json"))
    again = _compile(tmp_path, "b", damaged)
    assert again.validation["passed"] is True
    assert [k["key"] for k in again.kernels] == [k["key"] for k in first.kernels]
