"""The extra operators (beyond the required set) against onnxruntime."""

import numpy as np
import pytest
from frontend_kit import check_model, check_op, make_model, random
from onnx import helper

from compiler.frontend import import_model
from compiler.ir.graph_interp import run_graph


@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 2]}, {"strides": [2, 2], "pads": [1, 0, 1, 1]},
                                   {"strides": [2, 3], "output_padding": [1, 2], "dilations": [1, 2]},
                                   {"strides": [2, 2], "output_shape": [10, 8]},
                                   {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
                                   {"strides": [3, 2], "dilations": [2, 1], "pads": [2, 1, 0, 1]},
                                   {"strides": [4, 4], "pads": [1, 1, 1, 1]}])  # phases no tap reaches
def test_conv_transpose(attrs):
    """Lowered as one stride-1 convolution per output phase, interleaved (conv_transpose.py)."""
    check_op("ConvTranspose", {"x": random((1, 3, 4, 3))},
             {"w": random((3, 2, 3, 3), seed=1), "b": random((2,), seed=2)}, **attrs)


def test_conv_transpose_with_an_empty_output_axis_is_empty():
    """Pads that eat a whole axis: no output phase exists there, the result is empty."""
    m = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 0, 2, 0])],
                   {"x": random((1, 2, 1, 4))}, ["y"], {"w": random((2, 3, 3, 3), seed=1)})
    (y,) = run_graph(import_model(m.SerializeToString()), {"x": random((1, 2, 1, 4))}).values()
    assert y.shape == (1, 3, 0, 9)


def test_conv_transpose_3d_stride_two():
    check_op("ConvTranspose", {"x": random((1, 2, 3, 4, 2))}, {"w": random((2, 3, 2, 2, 2), seed=1)},
             strides=[2, 2, 2])


def test_conv_transpose_groups_bias_1d():
    check_op("ConvTranspose", {"x": random((2, 4, 5))},
             {"w": random((4, 3, 3), seed=1), "b": random((6,), seed=2)}, group=2, strides=[2])


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices(storage_order):
    check_op("MaxPool", {"x": random((1, 2, 5, 6))}, outputs=2, kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1], storage_order=storage_order)


def test_one_hot():
    check_op("OneHot", {"i": np.array([[0, 3, -1], [2, 9, 1]], np.int64)},
             {"depth": np.array(5, np.int64), "v": np.array([-1.0, 2.0], np.float32)}, axis=1)


def test_gather_nd():
    check_op("GatherND", {"x": random((2, 3, 4))}, {"i": np.array([[[0, 1], [1, 2]], [[1, 0], [0, 2]]], np.int64)})
    check_op("GatherND", {"x": random((2, 3, 4))}, {"i": np.array([[1], [2]], np.int64)}, batch_dims=1)


def test_group_normalization():
    check_op("GroupNormalization", {"x": random((2, 6, 3, 3))},
             {"s": random((6,), seed=1), "b": random((6,), seed=2)}, opset=21, num_groups=3, epsilon=1e-3)


def test_lrn():
    check_op("LRN", {"x": random((1, 5, 3, 3))}, size=3, alpha=1e-3, beta=0.6, bias=1.5)


def test_instance_of_misc_unaries():
    check_op("IsNaN", {"x": np.array([1.0, np.nan, np.inf], np.float32)})
    check_op("IsInf", {"x": np.array([1.0, -np.inf, np.inf], np.float32)}, detect_negative=0)


def test_hardmax_and_trilu():
    check_op("Hardmax", {"x": random((3, 4))}, axis=1)
    check_op("Trilu", {"x": random((2, 4, 5))}, {"k": np.array(1, np.int64)}, upper=0)


def test_mean_variance_normalization():
    check_op("MeanVarianceNormalization", {"x": random((2, 3, 4, 5))})


@pytest.mark.parametrize("mode,coords", [("nearest", "asymmetric"), ("nearest", "half_pixel"), ("linear", "half_pixel"),
                                         ("linear", "align_corners"), ("cubic", "pytorch_half_pixel"),
                                         ("linear", "asymmetric")])
@pytest.mark.parametrize("scales", [(1, 1, 2, 2), (1, 1, 0.5, 1.5)])
def test_resize_with_scales(mode, coords, scales):
    attrs = {"mode": mode, "coordinate_transformation_mode": coords}
    if mode == "nearest":
        attrs["nearest_mode"] = "floor" if coords == "asymmetric" else "round_prefer_ceil"
    check_op("Resize", {"x": random((1, 2, 4, 6))}, {"scales": np.array(scales, np.float32)},
             input_order=["x", "", "scales"], opset=13, **attrs)


def test_resize_with_sizes_and_upsample():
    check_op("Resize", {"x": random((1, 2, 4, 6))}, {"sizes": np.array([1, 2, 7, 3], np.int64)},
             input_order=["x", "", "", "sizes"], opset=13, mode="linear")
    check_op("Upsample", {"x": random((1, 2, 3, 3))}, {"s": np.array([1, 1, 2, 3], np.float32)}, opset=9)


@pytest.mark.parametrize("dt", [np.uint8, np.int8, np.int32])
def test_nearest_resize_of_non_float_elements(dt):
    x = random((1, 2, 3, 4), dt, low=0, high=100)
    check_op("Resize", {"x": x}, {"roi": np.array([], np.float32), "scales": np.array([1, 1, 1.5, 0.75], np.float32)},
             mode="nearest")


def test_integer_nearest_upsampling_is_index_arithmetic():
    model = make_model([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest",
                                         coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
                       {"x": random((1, 2, 4, 4))}, ["y"], {"s": np.array([1, 1, 2, 2], np.float32)}, opset=13)
    (node,) = import_model(model).nodes
    assert len(node.inputs) == 1 and not node.compute.reduce_axes


@pytest.mark.parametrize("scale", [2, 4])
def test_integer_nearest_upsampling_repeats_whole_columns(scale):
    """An innermost factor of 2 or 4 is computed over [..., width, factor] (each column
    repeated, zipped into vectors by the kernel) and viewed as the output."""
    x = random((1, 3, 5, 19))
    s = np.array([1, 1, 3, scale], np.float32)
    check_op("Resize", {"x": x}, {"s": s}, input_order=["x", "", "s"], opset=13, mode="nearest")
    model = make_model([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest")],
                       {"x": x}, ["y"], {"s": s}, opset=13)
    (node,) = import_model(model).nodes
    assert node.compute.shape == (1, 3, 15, 19, scale)


def test_integer_nearest_upsampling_of_other_element_types_is_not_split():
    """Only float32 rows are zipped into vectors: an int8 upsampling keeps the output's shape."""
    x = random((1, 2, 3, 16), np.int8, low=-50, high=50)
    s = np.array([1, 1, 2, 2], np.float32)
    check_op("Resize", {"x": x}, {"s": s}, input_order=["x", "", "s"], opset=13, mode="nearest")
    model = make_model([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest")],
                       {"x": x}, ["y"], {"s": s}, opset=13)
    (node,) = import_model(model).nodes
    assert node.compute.shape == (1, 2, 6, 32)


def test_function_defined_op_lowers_through_its_body():
    q, k, v = random((2, 3, 4, 8), seed=1), random((2, 3, 6, 8), seed=2), random((2, 3, 6, 8), seed=3)
    check_op("Attention", {"q": q, "k": k, "v": v}, opset=23, is_causal=1)
    model = make_model([helper.make_node("Attention", ["q", "k", "v"], ["y"])], {"q": q, "k": k, "v": v},
                       ["y"], opset=23)
    ops = {n.op for n in import_model(model).nodes}
    assert "Attention" not in ops and {"MatMul", "Softmax"} <= ops


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ii->i", [(4, 4)]),
    ("...ij,...jk", [(2, 3, 4), (1, 4, 2)]), ("i,i", [(5,), (5,)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
])
def test_einsum(equation, shapes):
    check_op("Einsum", {f"x{k}": random(s, seed=k) for k, s in enumerate(shapes)}, opset=12, equation=equation)


def test_quantize_dequantize_round_trip_per_axis():
    x = random((2, 3, 4), low=-5, high=5)
    check_op("QuantizeLinear", {"x": x}, {"s": np.array([0.1, 0.2, 0.05], np.float32),
                                          "z": np.array([0, 3, -2], np.int8)}, axis=1, opset=13)
    check_op("DequantizeLinear", {"q": random((2, 3), np.uint8, 0, 0, 255)},
             {"s": np.array(0.05, np.float32), "z": np.array(128, np.uint8)}, opset=13)


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_elements_and_nd(reduction):
    check_op("ScatterElements", {"x": random((3, 4)), "u": random((2, 4), seed=1)},
             {"i": np.array([[0, 2, 1, 0], [2, 2, 0, 1]], np.int64)}, input_order=["x", "i", "u"], opset=18,
             axis=0, reduction=reduction)
    check_op("ScatterND", {"x": random((4, 3)), "u": random((2, 3), seed=1)},
             {"i": np.array([[3], [1]], np.int64)}, input_order=["x", "i", "u"], opset=18, reduction=reduction)


@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_with_ties(largest):
    x = random((3, 6), np.int64, 0, 0, 3).astype(np.float32)
    check_op("TopK", {"x": x}, {"k": np.array([4], np.int64)}, outputs=2, axis=1, largest=largest)


def test_integer_and_quantized_contractions():
    a, b = random((3, 4), np.uint8, 1, 0, 255), random((4, 5), np.uint8, 2, 0, 255)
    check_op("MatMulInteger", {"a": a, "b": b}, {"az": np.array(12, np.uint8), "bz": np.array(200, np.uint8)})
    check_op("QLinearMatMul", {"a": a},
             {"as": np.array(0.02, np.float32), "az": np.array(12, np.uint8), "b": b,
              "bs": np.array(0.01, np.float32), "bz": np.array(200, np.uint8),
              "ys": np.array(0.5, np.float32), "yz": np.array(100, np.uint8)})


def test_qlinear_conv_matches_integer_arithmetic():
    # onnxruntime's u8s8 kernel saturates intermediate sums on x86, so the reference is exact numpy here
    x, w = random((1, 2, 5, 5), np.uint8, 3, 0, 255), random((3, 2, 3, 3), np.int8, 4, -100, 100)
    ws, b = np.array([0.01, 0.02, 0.03], np.float32), np.array([10, -20, 30], np.int32)
    weights = {"xs": np.array(0.05, np.float32), "xz": np.array(20, np.uint8), "w": w, "ws": ws,
               "wz": np.zeros(3, np.int8), "ys": np.array(0.9, np.float32), "yz": np.array(5, np.uint8), "b": b}
    model = make_model([helper.make_node("QLinearConv", ["x", *weights], ["y"], pads=[1, 1, 1, 1])], {"x": x}, ["y"],
                       weights)
    got = run_graph(import_model(model), {"x": x})["y"]
    padded = np.pad(x.astype(np.int64) - 20, ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = np.zeros((1, 3, 5, 5), np.int64)
    for o, r, c in np.ndindex(3, 5, 5):
        acc[0, o, r, c] = (padded[0, :, r:r + 3, c:c + 3] * w[o]).sum() + b[o]
    real = acc.astype(np.float32) * (np.float32(0.05) * ws[None, :, None, None]) / np.float32(0.9)
    np.testing.assert_array_equal(got, np.clip(np.rint(real) + 5, 0, 255).astype(np.uint8))


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample(mode, padding_mode, align_corners):
    check_op("GridSample", {"x": random((1, 2, 4, 5)), "g": random((1, 3, 6, 2), seed=1, low=-1.3, high=1.3)},
             opset=16, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


def test_reverse_sequence_and_max_unpool():
    check_op("ReverseSequence", {"x": random((4, 3)), "n": np.array([4, 1, 3], np.int64)}, batch_axis=1, time_axis=0)
    check_op("MaxUnpool", {"x": random((1, 2, 2, 2))}, {"i": np.array([[[[0, 3], [9, 14]], [[17, 18], [24, 31]]]])},
             kernel_shape=[2, 2], strides=[2, 2], opset=11)


def test_col2im():
    check_op("Col2Im", {"x": random((1, 6, 8))}, {"image": np.array([4, 5], np.int64),
                                                 "block": np.array([2, 3], np.int64)}, opset=18, strides=[2, 1],
             pads=[0, 1, 1, 0])


def _if_model(cond_value=None):
    x = random((2, 3))
    then = helper.make_graph([helper.make_node("Add", ["x", "w"], ["t"])], "then", [],  # w: an outer weight
                             [helper.make_tensor_value_info("t", 1, [2, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", 1, [2, 3])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    weights = {"w": random((3,), seed=5)} | ({} if cond_value is None else {"c": np.array(cond_value)})
    inputs = {"x": x} if cond_value is not None else {"x": x, "c": np.array(False)}
    return make_model(nodes, inputs, ["y"], weights), inputs


@pytest.mark.parametrize("cond", [True, False, None])
def test_if_inlines_a_constant_branch_or_selects(cond):
    model, feeds = _if_model(cond)
    g = import_model(model)
    assert "If" not in {n.op for n in g.nodes}
    if cond is not None:
        assert len(g.nodes) == 1
    check_model(model, feeds)


@pytest.mark.parametrize("attrs", [{}, {"onesided": 1}, {"inverse": 1}])
def test_dft_against_numpy(attrs):
    x = random((2, 8, 3, 2))
    model = make_model([helper.make_node("DFT", ["x", "", "axis"], ["y"], **attrs)], {"x": x}, ["y"],
                       {"axis": np.array(1, np.int64)}, opset=20)
    got = run_graph(import_model(model), {"x": x})["y"]
    signal = x[..., 0] + 1j * x[..., 1]
    want = np.fft.ifft(signal, axis=1) if attrs.get("inverse") else np.fft.fft(signal, axis=1)
    if attrs.get("onesided"):
        want = want[:, :5]
    np.testing.assert_allclose(got, np.stack([want.real, want.imag], -1), rtol=1e-5, atol=1e-5)


def test_top_k_attribute_form():
    check_op("TopK", {"x": random((3, 6))}, outputs=2, opset=9, k=2)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("coords", ["half_pixel", "output_half_pixel"])
def test_roi_align(mode, coords):
    rois = np.array([[0.5, 1.0, 6.0, 7.5], [2.0, 0.0, 9.5, 4.0], [-1.0, -1.0, 3.0, 12.0]], np.float32)
    check_op("RoiAlign", {"x": random((2, 3, 8, 10))}, {"rois": rois, "b": np.array([0, 1, 1], np.int64)},
             opset=16, mode=mode, coordinate_transformation_mode=coords, output_height=3, output_width=4,
             sampling_ratio=2, spatial_scale=0.9)


def test_deform_conv():
    x, w = random((1, 4, 6, 6)), random((6, 2, 3, 3), seed=1)
    offsets = random((1, 2 * 9 * 2, 4, 4), seed=2, low=-1.5, high=1.5)
    mask = random((1, 2 * 9, 4, 4), seed=3, low=0, high=1)
    check_op("DeformConv", {"x": x, "o": offsets}, {"w": w, "b": random((6,), seed=4), "m": mask},
             input_order=["x", "w", "o", "b", "m"], opset=19, group=2, offset_group=2)


def test_scan_unrolls_a_running_sum():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body", [helper.make_tensor_value_info("s_in", 1, [3]), helper.make_tensor_value_info("x_t", 1, [3])],
        [helper.make_tensor_value_info("s_out", 1, [3]), helper.make_tensor_value_info("y_t", 1, [3])])
    check_op("Scan", {"s": random((3,)), "x": random((4, 3), seed=1)}, outputs=2, opset=11, body=body,
             num_scan_inputs=1, scan_input_directions=[1])


def test_loop_with_constant_trip_count():
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Mul", ["v_in", "w"], ["v_out"]),
         helper.make_node("Cast", ["i"], ["i_f"], to=1), helper.make_node("Add", ["v_out", "i_f"], ["scan_t"])],
        "body", [helper.make_tensor_value_info("i", 7, []), helper.make_tensor_value_info("c_in", 9, []),
                 helper.make_tensor_value_info("v_in", 1, [2])],
        [helper.make_tensor_value_info("c_out", 9, []), helper.make_tensor_value_info("v_out", 1, [2]),
         helper.make_tensor_value_info("scan_t", 1, [2])])
    check_op("Loop", {"v": random((2,))}, {"n": np.array(3, np.int64), "c": np.array(True), "w": random((2,), seed=1)},
             input_order=["n", "c", "v"], outputs=2, opset=13, body=body)
