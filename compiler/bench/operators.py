"""The operator table of `make bench`: single-operator models at the shapes that matter
(BERT-base, ResNet-50, MobileNet), each compiled cold and timed against onnxruntime."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.bench.measure import compare_latency
from compiler.bench.sections import machine_description
from compiler.cache import MemoryKernelCache


def _single(op: str, x_shape: list[int], weights: dict[str, np.ndarray], inputs: list[str],
            opset: int = 17, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, inputs, ["y"], **attrs)
    inits = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    g = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def _w(*shape: int) -> np.ndarray:
    return (np.random.default_rng(0).standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


def operator_models() -> dict[str, onnx.ModelProto]:
    """Name -> one-operator model."""
    m: dict[str, onnx.ModelProto] = {}
    for n in (512, 1024, 2048):
        m[f"matmul {n}x{n}x{n}"] = _single("MatMul", [n, n], {"w": _w(n, n)}, ["x", "w"])
    m["bert qkv proj 128x768x768"] = _single("MatMul", [128, 768], {"w": _w(768, 768)}, ["x", "w"])
    m["bert ffn1 128x768x3072"] = _single("MatMul", [128, 768], {"w": _w(768, 3072)}, ["x", "w"])
    m["bert ffn2 128x3072x768"] = _single("MatMul", [128, 3072], {"w": _w(3072, 768)}, ["x", "w"])
    for size, c in ((56, 64), (14, 256)):
        m[f"resnet conv3x3 {c}ch {size}x{size}"] = _single(
            "Conv", [1, c, size, size], {"w": _w(c, c, 3, 3)}, ["x", "w"], pads=[1, 1, 1, 1])
        m[f"resnet conv1x1 {c}->{4 * c} {size}x{size}"] = _single(
            "Conv", [1, c, size, size], {"w": _w(4 * c, c, 1, 1)}, ["x", "w"])
    m["resnet stem conv7x7 s2 3->64 224x224"] = _single(
        "Conv", [1, 3, 224, 224], {"w": _w(64, 3, 7, 7)}, ["x", "w"], pads=[3, 3, 3, 3], strides=[2, 2])
    # DeepLab's atrous rate 18 on a 32 x 32 map: most taps of the border rows read only padding
    m["dilated conv3x3 d18 64ch 32x32"] = _single(
        "Conv", [1, 64, 32, 32], {"w": _w(64, 64, 3, 3)}, ["x", "w"], pads=[18, 18, 18, 18], dilations=[18, 18])
    m["mobilenet depthwise 3x3 144ch 56x56"] = _single(
        "Conv", [1, 144, 56, 56], {"w": _w(144, 1, 3, 3)}, ["x", "w"], pads=[1, 1, 1, 1], group=144)
    m.update(_small_map_conv_models())
    m["softmax 128x768"] = _single("Softmax", [128, 768], {}, ["x"], axis=-1)
    m["layernorm 128x768"] = _single("LayerNormalization", [128, 768],
                                     {"g": np.ones(768, np.float32), "b": np.zeros(768, np.float32)},
                                     ["x", "g", "b"], axis=-1)
    m["add+relu 1x256x56x56"] = _relu_add()
    m["reducemean 128x768"] = _single("ReduceMean", [128, 768], {"axes": np.array([-1], np.int64)}, ["x", "axes"],
                                      opset=18)
    m["global avgpool 1x2048x7x7"] = _single("GlobalAveragePool", [1, 2048, 7, 7], {}, ["x"])
    # YOLO's and FPN's 2x nearest-neighbour upsampling (stop 47: 0.60x onnxruntime before)
    m["nearest upsample 2x 128ch 40x40"] = _single(
        "Resize", [1, 128, 40, 40], {"scales": np.array([1, 1, 2, 2], np.float32)}, ["x", "", "scales"],
        mode="nearest")
    m.update(_activation_models())
    return m


def _chain(name: str, x_shape: list[int], nodes: list[tuple], weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """A model of `nodes` ((op, inputs, output, attrs) each) from input x to output y."""
    g = helper.make_graph([helper.make_node(op, ins, [out], **attrs) for op, ins, out, attrs in nodes], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in weights.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def _activation_models() -> dict[str, onnx.ModelProto]:
    """Transcendental activations as exporters write them, alone and as contraction epilogues."""
    def f(v: float) -> np.ndarray:
        return np.array(v, np.float32)
    # GPT-2's GELU: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    gelu_tanh = [("Pow", ["x", "three"], "p", {}), ("Mul", ["p", "c"], "q", {}), ("Add", ["x", "q"], "s", {}),
                 ("Mul", ["s", "k"], "u", {}), ("Tanh", ["u"], "t", {}), ("Add", ["t", "one"], "v", {}),
                 ("Mul", ["x", "v"], "w", {}), ("Mul", ["w", "half"], "y", {})]
    # BERT's GELU: x (1 + erf(x / sqrt(2))) / 2
    gelu_erf = [("Div", ["x", "sqrt2"], "d", {}), ("Erf", ["d"], "e", {}), ("Add", ["e", "one"], "v", {}),
                ("Mul", ["x", "v"], "w", {}), ("Mul", ["w", "half"], "y", {})]
    tanh_consts = {"three": f(3.0), "c": f(0.044715), "k": f(0.7978845608), "one": f(1.0), "half": f(0.5)}
    erf_consts = {"sqrt2": f(1.4142135), "one": f(1.0), "half": f(0.5)}
    silu = [("Sigmoid", ["x"], "s", {}), ("Mul", ["x", "s"], "y", {})]
    depthwise = [("Conv", ["x", "w"], "z", {"pads": [1, 1, 1, 1], "group": 96}), ("Sigmoid", ["z"], "s", {}),
                 ("Mul", ["z", "s"], "y", {})]
    grouped = [("Conv", ["x", "w"], "z", {"pads": [1, 1, 1, 1], "group": 19}), ("Relu", ["z"], "y", {})]
    return {
        "gelu tanh 128x3072": _chain("gelu_tanh", [128, 3072], gelu_tanh, tanh_consts),
        "erf gelu 128x3072": _chain("gelu_erf", [128, 3072], gelu_erf, erf_consts),
        "silu 1x96x112x112": _chain("silu", [1, 96, 112, 112], silu, {}),
        "depthwise conv+silu 96ch 112x112": _chain("dw_silu", [1, 96, 112, 112], depthwise, {"w": _w(96, 1, 3, 3)}),
        "grouped conv3x3+relu 152ch g8 28x28": _chain("grouped", [1, 152, 28, 28], grouped, {"w": _w(152, 8, 3, 3)}),
    }


def _small_map_conv_models() -> dict[str, onnx.ModelProto]:
    """MobileNet's depthwise convolutions on small maps (computed plane by plane), ConvNeXt's
    7x7 one (the cliff docs/PROFILE.md's stop 45 measured: 0.5x onnxruntime on a Zen 4) and a
    RegNet-width grouped convolution (patches read in place per group), with their epilogues."""
    clip = {"lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32)}

    def dw_clip(channels: int, stride: int) -> list[tuple]:
        return [("Conv", ["x", "w"], "z", {"pads": [1, 1, 1, 1], "group": channels, "strides": [stride, stride]}),
                ("Clip", ["z", "lo", "hi"], "y", {})]
    grouped = [("Conv", ["x", "w"], "z", {"pads": [1, 1, 1, 1], "group": 8}), ("Relu", ["z"], "y", {})]
    return {
        "depthwise conv+clip 960ch 7x7": _chain("dw7", [1, 960, 7, 7], dw_clip(960, 1),
                                                {"w": _w(960, 1, 3, 3), **clip}),
        "depthwise conv s2+clip 576ch 14x14": _chain("dw14s2", [1, 576, 14, 14], dw_clip(576, 2),
                                                     {"w": _w(576, 1, 3, 3), **clip}),
        "depthwise conv5x5+silu 480ch 14x14": _chain("dw5", [1, 480, 14, 14], [
            ("Conv", ["x", "w"], "z", {"pads": [2, 2, 2, 2], "group": 480}), ("Sigmoid", ["z"], "s", {}),
            ("Mul", ["z", "s"], "y", {})], {"w": _w(480, 1, 5, 5)}),
        "depthwise conv7x7 384ch 14x14": _chain("dw7x7", [1, 384, 14, 14], [
            ("Conv", ["x", "w"], "y", {"pads": [3, 3, 3, 3], "group": 384})], {"w": _w(384, 1, 7, 7)}),
        "grouped conv3x3+relu 128ch width 16 28x28": _chain("grouped16", [1, 128, 28, 28], grouped,
                                                           {"w": _w(128, 16, 3, 3)}),
    }


def _relu_add() -> onnx.ModelProto:
    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    g = helper.make_graph(nodes, "add_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256, 56, 56])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(_w(1, 256, 1, 1), "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def operator_section(threads: int) -> tuple[list[str], list[dict]]:
    """Markdown lines and JSON rows of the operator table (cold compiles, `threads` threads)."""
    from compiler.pipeline import compile_model

    machine = machine_description()
    rows: list[dict] = []
    for name, model in operator_models().items():
        data = model.SerializeToString()
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            r = compile_model(data, "cpu", {"threads": threads}, cache=MemoryKernelCache(),
                              output=Path(d) / "a.tar.gz")
            wall = time.perf_counter() - t0
            ours, ref = (t * 1e6 for t in compare_latency(r.artifact_path, data, threads)[:2])
        est = sum(k["estimated_us"] or 0.0 for k in r.kernels)
        meas = [k["measured_us"] for k in r.kernels if k["measured_us"] is not None]
        rows.append({
            "operator": name, "kernels": len(r.kernels),
            "construct_ms": round(r.report["construct_seconds"] * 1e3, 2),
            "tune_s": round(r.stage_seconds.get("schedule", 0) - r.report["construct_seconds"], 3),
            "toolchain_s": round(r.stage_seconds.get("build", 0), 3),
            "compile_wall_s": round(wall, 3),
            "predicted_us": round(est, 1) if est else None,
            "measured_kernel_us": round(sum(meas), 1) if meas else None,
            "tileforge_us": round(ours, 1), "onnxruntime_us": round(ref, 1),
            "speedup": round(ref / ours, 3), "rel_l2_error": r.validation.get("rel_l2_error"),
        })
    lines = [
        f"## Operators (CPU, {threads} thread{'s' * (threads > 1)})",
        "",
        "construct = rTile construction + cost model; tune = compiling and timing the top-k",
        "candidates on this CPU; toolchain = gcc for the chosen kernels; predicted = the",
        "micro-performance model's estimate of the chosen tiling; measured = that kernel timed",
        "during compilation; tileforge / onnxruntime = median end-to-end latency.",
        "",
        f"Measured on {machine} (`--section operators` reruns this section alone).",
        "",
        "| operator | construct ms | tune s | toolchain s | predicted us | measured us | tileforge us | onnxruntime us | speedup |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        pred = "-" if r["predicted_us"] is None else f"{r['predicted_us']:.1f}"
        meas = "-" if r["measured_kernel_us"] is None else f"{r['measured_kernel_us']:.1f}"
        lines.append(f"| {r['operator']} | {r['construct_ms']:.1f} | {r['tune_s']:.2f} | {r['toolchain_s']:.2f} | {pred} | "
                     f"{meas} | {r['tileforge_us']:.1f} | {r['onnxruntime_us']:.1f} | {r['speedup']:.2f}x |")
    median_construct = sorted(r["construct_ms"] for r in rows)[len(rows) // 2]
    lines += ["", f"Median construction + model time per operator: {median_construct:.1f} ms."]
    return lines, rows
