"""Attention fused into one kernel on the C backend (compiler/schedule/tilegraph/attention.py,
compiler/codegen/c/attention.py): each model is compiled, validated against onnxruntime, and
its plan checked for the one attention kernel (or, for near misses, for none)."""

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from compiler.bench.attention_blocks import bert_attention, llama_attention
from compiler.codegen.c.kernel import render_kernel
from compiler.pipeline import compile_model
from compiler.runtime import load
from compiler.schedule.plan import ExecutionPlan
from tests.compiler.attention_kit import attention_feeds, attention_model


def _attention_kernels(plan: ExecutionPlan) -> int:
    return sum(1 for k in plan.kernels if k.tile.attention)


def _compile(tmp_path: Path, **kw) -> tuple[ExecutionPlan, Path]:
    r = compile_model(attention_model(**kw), "cpu", {"measure": False}, output=tmp_path / "a.tar.gz")
    assert r.validation["passed"], r.validation
    return r.plan, r.artifact_path


@pytest.mark.parametrize("seq", [7, 128, 200])
def test_bert_attention_with_a_padding_mask_is_one_kernel(tmp_path: Path, seq: int):
    plan, _ = _compile(tmp_path, batch=2, heads=3, seq=seq, head_dim=64 if seq == 128 else 24)
    assert _attention_kernels(plan) == 1
    assert len(plan.kernels) == 1  # K's transpose is read by index, the scores never stored


@pytest.mark.parametrize("mask", ["causal_trilu", "causal_where", "additive"])
def test_causal_gpt_attention_is_one_kernel(tmp_path: Path, mask: str):
    # "additive": a float [queries, keys] mask, as exports fold a causal one (gathered on vectors)
    plan, _ = _compile(tmp_path, heads=4, seq=70, head_dim=32, mask=mask)
    assert _attention_kernels(plan) == 1


@pytest.mark.parametrize("kv_heads", [2, 1])
def test_gqa_and_mqa_read_the_shared_key_and_value_heads_by_index(tmp_path: Path, kv_heads: int):
    plan, _ = _compile(tmp_path, batch=2, heads=8, kv_heads=kv_heads, seq=37, head_dim=16, mask="causal_trilu")
    assert _attention_kernels(plan) == 1
    assert len(plan.kernels) == 1  # no copy of a key or value head is written


def test_scale_on_queries_and_keys_as_the_sdpa_decomposition(tmp_path: Path):
    plan, _ = _compile(tmp_path, heads=4, kv_heads=2, seq=19, scale_on="qk")
    assert _attention_kernels(plan) == 1


def test_scale_on_queries_with_more_keys_than_queries(tmp_path: Path):
    plan, _ = _compile(tmp_path, seq=33, keys=90, head_dim=64, scale_on="q", mask="none")
    assert _attention_kernels(plan) == 1


def test_boolean_mask_through_where_and_keys_given_transposed(tmp_path: Path):
    plan, _ = _compile(tmp_path, batch=2, seq=50, mask="bool", k_transposed=True)
    assert _attention_kernels(plan) == 1


def test_a_boolean_mask_per_query_row_is_gathered_into_vector_selects(tmp_path: Path):
    plan, _ = _compile(tmp_path, batch=2, heads=3, seq=41, head_dim=32, mask="bool_rows")
    (kernel,) = [k for k in plan.kernels if k.tile.attention]
    assert "const tf_v g0 = {" in render_kernel(kernel.compute, kernel.tile, "k")  # the mask gathered per vector


@pytest.mark.parametrize("nan_to_zero", [False, True])
def test_a_query_row_whose_keys_are_all_masked_comes_out_as_unfused(tmp_path: Path, nan_to_zero: bool):
    m = attention_model(batch=2, seq=9, mask="bool", nan_to_zero=nan_to_zero)
    plan, artifact = _compile(tmp_path, batch=2, seq=9, mask="bool", nan_to_zero=nan_to_zero)
    assert _attention_kernels(plan) == 1
    feeds = attention_feeds(m)
    feeds["bool_mask"][:] = False
    feeds["bool_mask"][0, ..., 0] = True  # batch 0's first key seen, so its rows are not all masked
    ours = load(artifact).run(feeds)["o"]
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)  # NaN where the reference is NaN
    assert np.isnan(ref).any() != nan_to_zero


@pytest.mark.parametrize("near_miss", [{"softmax_axis": -2}, {"outputs": ("o", "p")}])
def test_near_misses_stay_unfused(tmp_path: Path, near_miss: dict):
    plan, _ = _compile(tmp_path, seq=12, **near_miss)
    assert _attention_kernels(plan) == 0


def test_bert_block_is_its_projections_and_one_attention_kernel(tmp_path: Path):
    r = compile_model(bert_attention(seq=13, hidden=64, heads=4), "cpu", {"measure": False},
                      output=tmp_path / "a.tar.gz")
    assert r.validation["passed"], r.validation
    # Q, K, V and output projections; the heads' split and merge are read and written in place
    assert len(r.plan.kernels) == 5 and _attention_kernels(r.plan) == 1


def test_llama_gqa_block_reads_the_projections_of_the_shared_heads(tmp_path: Path):
    r = compile_model(llama_attention(seq=20, hidden=128, heads=8, kv_heads=2), "cpu", {"measure": False},
                      output=tmp_path / "a.tar.gz")
    assert r.validation["passed"], r.validation
    assert len(r.plan.kernels) == 5 and _attention_kernels(r.plan) == 1


@pytest.mark.parametrize("shape", [{"seq": 1, "keys": 33, "mask": "none"}, {"seq": 5, "keys": 1, "mask": "none"},
                                   {"seq": 21, "heads": 3, "head_dim": 80}])
def test_a_decode_step_one_key_and_a_head_dim_of_no_whole_vectors(tmp_path: Path, shape: dict):
    plan, _ = _compile(tmp_path, **shape)
    assert _attention_kernels(plan) == 1


@pytest.mark.parametrize("shape", [{"seq": 300, "heads": 2, "mask": "causal_trilu"},
                                   {"seq": 45, "keys": 100, "mask": "causal_additive"},
                                   {"seq": 130, "heads": 3, "mask": "causal_where", "head_dim": 24}])
def test_causal_attention_skips_the_masked_keys_at_any_length(tmp_path: Path, shape: dict):
    # lengths no block divides; more keys than queries: the mask's diagonal is offset
    plan, _ = _compile(tmp_path, **shape)
    (kernel,) = [k for k in plan.kernels if k.tile.attention]
    assert len(kernel.compute.inputs) == 3  # the constant mask is read as an index comparison


def test_masked_keys_are_still_counted_where_the_fill_is_close_to_the_scores(tmp_path: Path):
    # a fill of -3 leaves the masked keys' exponentials far from 0: no key may be skipped
    plan, _ = _compile(tmp_path, seq=90, heads=2, mask="causal_trilu", fill=-3.0)
    assert _attention_kernels(plan) == 1
