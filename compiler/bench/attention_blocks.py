"""Self-attention blocks as the exporters write them (issue 16), built in code, timed
against onnxruntime in the same process: `python -m compiler.bench.attention_blocks
--threads 2`.

- BERT-base: hidden 768, 12 heads, batch 1; Q, K, V projections, heads split by Reshape
  and Transpose (K to [b, h, d, s], as Hugging Face's BertSelfAttention), scores / 8
  plus an additive padding mask given as an input, softmax, times V, heads merged back,
  output projection.
- Llama-style GQA: hidden 2048, 32 query heads and 8 key / value heads shared through
  repeat_kv (Unsqueeze, Expand, Reshape), a causal mask built from shapes (Trilu of ones,
  Where), no rotary embedding (it is element-wise work outside the attention).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import numpy as np
import onnx

from compiler.bench.measure import BenchResult, bench_model
from compiler.bench.models import _Builder


def _heads(b: _Builder, x: str, seq: int, heads: int, head_dim: int, perm: list[int]) -> str:
    """[1, seq, heads * head_dim] -> heads, transposed by `perm` from [1, seq, heads, head_dim]."""
    shape = b.const(np.array([1, seq, heads, head_dim], np.int64))
    return b.op("Transpose", [b.op("Reshape", [x, shape])], perm=perm)


def _projection(b: _Builder, x: str, hidden: int, out: int) -> str:
    return b.op("Add", [b.op("MatMul", [x, b.weight((hidden, out))]), b.weight((out,), 0.02)])


def _attend(b: _Builder, q: str, kt: str, v: str, head_dim: int, mask: str | Callable[[str], str], seq: int,
            hidden: int) -> str:
    """softmax(q kt / sqrt(d) + mask) v, heads merged back to [1, seq, hidden], projected."""
    s = b.op("Div", [b.op("MatMul", [q, kt]), b.const(np.array(np.sqrt(head_dim), np.float32))])
    p = b.op("Softmax", [mask(s) if callable(mask) else b.op("Add", [s, mask])], axis=-1)
    o = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    o = b.op("Reshape", [o, b.const(np.array([1, seq, hidden], np.int64))])
    return _projection(b, o, hidden, hidden)


def bert_attention(seq: int = 128, hidden: int = 768, heads: int = 12) -> onnx.ModelProto:
    """BERT-base self-attention with a padding mask input [1, 1, 1, seq]."""
    b, d = _Builder(0), hidden // heads
    q = _heads(b, _projection(b, "x", hidden, hidden), seq, heads, d, [0, 2, 1, 3])
    kt = _heads(b, _projection(b, "x", hidden, hidden), seq, heads, d, [0, 2, 3, 1])
    v = _heads(b, _projection(b, "x", hidden, hidden), seq, heads, d, [0, 2, 1, 3])
    y = _attend(b, q, kt, v, d, "mask", seq, hidden)
    return b.model([("x", [1, seq, hidden]), ("mask", [1, 1, 1, seq])], [("y", y)], name="bert_attention")


def llama_attention(seq: int = 512, hidden: int = 2048, heads: int = 32, kv_heads: int = 8) -> onnx.ModelProto:
    """Llama-style GQA self-attention with a causal mask built from shapes."""
    b, d, group = _Builder(0), hidden // heads, heads // kv_heads
    q = _heads(b, _projection(b, "x", hidden, hidden), seq, heads, d, [0, 2, 1, 3])
    kv = []
    for _ in range(2):  # K and V, each repeated to every query head of its group
        x = _heads(b, _projection(b, "x", hidden, kv_heads * d), seq, kv_heads, d, [0, 2, 1, 3])
        x = b.op("Unsqueeze", [x, b.const(np.array([2], np.int64))])
        x = b.op("Expand", [x, b.const(np.array([1, kv_heads, group, seq, d], np.int64))])
        kv.append(b.op("Reshape", [x, b.const(np.array([1, heads, seq, d], np.int64))]))
    kt = b.op("Transpose", [kv[0]], perm=[0, 1, 3, 2])

    def causal(s: str) -> str:
        lower = b.op("Trilu", [b.const(np.ones((seq, seq), np.float32))], upper=0)
        future = b.op("Equal", [lower, b.const(np.array(0.0, np.float32))])
        return b.op("Where", [future, b.const(np.array(np.finfo(np.float32).min, np.float32)), s])

    y = _attend(b, q, kt, kv[1], d, causal, seq, hidden)
    return b.model([("x", [1, seq, hidden])], [("y", y)], name="llama_attention")


BLOCKS: dict[str, Callable[[], onnx.ModelProto]] = {
    "bert_base_attention_seq128": lambda: bert_attention(128),
    "bert_base_attention_seq512": lambda: bert_attention(512),
    "llama_gqa_causal_attention_seq512": lambda: llama_attention(512),
}


def attention_section(threads: int) -> tuple[list[str], list[dict]]:
    """The report's "Attention blocks (issue 16)" section: its lines and its JSON rows.

    Each row also sets both runtimes against the machine's measured FMA peak: `% peak`
    is tileforge's achieved share of it, and `ceiling` is onnxruntime's time over the
    block's time at that peak, the largest speedup any kernel could show on this host."""
    from compiler.bench.real_suite import model_flops, peak_flops_per_thread
    from compiler.bench.sections import machine_description

    peak = peak_flops_per_thread() * threads
    rows: list[tuple[BenchResult, float]] = []
    for name, build in BLOCKS.items():
        model = build()
        r = bench_model(model, name, "cpu", threads)
        print(f"{name} threads={threads}: {r.tileforge_ms:.3f} ms vs onnxruntime "
              f"{r.onnxruntime_ms:.3f} ms ({r.speedup:.2f}x)", file=sys.stderr)
        rows.append((r, model_flops(model.SerializeToString())))
    lines = ["## Attention blocks (issue 16)", "",
             "Self-attention blocks built in code (compiler/bench/attention_blocks.py): the scores, mask,",
             "softmax and product with V run as one flash-style kernel (the scores never reach memory).",
             "GFLOP: the TE analyses' count (a multiply-add counting 2), most of it the four projections.",
             f"% peak: tileforge's share of {peak / 1e9:.0f} GFLOP/s, the measured FMA peak of {threads} threads.",
             "Ceiling: onnxruntime's time over the block's time at that peak, the largest speedup this host allows.",
             f"Measured on {machine_description()} (`--section attention` reruns this section alone).",
             "",
             "| block | threads | kernels | GFLOP | tileforge ms | onnxruntime ms | speedup | % peak | ceiling "
             "| rel. L2 error |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
             *[f"| {r.model} | {r.threads} | {r.kernels} | {flops / 1e9:.3f} | {r.tileforge_ms:.3f} | "
               f"{r.onnxruntime_ms:.3f} | {r.speedup:.2f}x | {100 * flops / peak / (r.tileforge_ms / 1e3):.0f}% | "
               f"{r.onnxruntime_ms / 1e3 / (flops / peak):.2f}x | {r.rel_l2_error:.1e} |" for r, flops in rows], ""]
    return lines, [{**r.to_dict(), "gflop": flops / 1e9, "peak_gflops": peak / 1e9} for r, flops in rows]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    print("\n".join(attention_section(a.threads)[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
