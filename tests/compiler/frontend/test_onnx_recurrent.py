"""RNN / GRU / LSTM unrolled into Computes, against onnxruntime."""

import numpy as np
import pytest
from frontend_kit import check_op, random

SEQ, BATCH, INPUT, HIDDEN = 4, 2, 3, 5


def weights(op: str, dirs: int, seed: int = 1) -> dict:
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    return {"w": random((dirs, gates * HIDDEN, INPUT), seed=seed, low=-0.5, high=0.5),
            "r": random((dirs, gates * HIDDEN, HIDDEN), seed=seed + 1, low=-0.5, high=0.5),
            "b": random((dirs, 2 * gates * HIDDEN), seed=seed + 2, low=-0.5, high=0.5)}


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrent_directions(op, direction):
    dirs = 2 if direction == "bidirectional" else 1
    check_op(op, {"x": random((SEQ, BATCH, INPUT))}, weights(op, dirs), outputs=3 if op == "LSTM" else 2,
             direction=direction, hidden_size=HIDDEN)


def test_lstm_with_states_peepholes_and_clip():
    w = weights("LSTM", 1) | {"h0": random((1, BATCH, HIDDEN), seed=7), "c0": random((1, BATCH, HIDDEN), seed=8),
                              "p": random((1, 3 * HIDDEN), seed=9, low=-0.5, high=0.5)}
    check_op("LSTM", {"x": random((SEQ, BATCH, INPUT))}, w, outputs=3, hidden_size=HIDDEN, clip=0.8,
             input_order=["x", "w", "r", "b", "", "h0", "c0", "p"])


def test_gru_linear_before_reset():
    check_op("GRU", {"x": random((SEQ, BATCH, INPUT))}, weights("GRU", 1), outputs=2, hidden_size=HIDDEN,
             linear_before_reset=1)
    # batch-first layout (which onnxruntime lacks) is covered by the ONNX node suite


def test_rnn_with_parameterized_activations():
    check_op("RNN", {"x": random((SEQ, BATCH, INPUT))}, weights("RNN", 2), outputs=2, hidden_size=HIDDEN,
             direction="bidirectional", activations=["LeakyRelu", "HardSigmoid"], activation_alpha=[0.1, 0.3],
             activation_beta=[0.6])


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("runtime", [False, True])
def test_sequence_lens_shorter_than_the_sequence(op, direction, runtime):
    """Padded batches (torch's packed sequences): past its length a row outputs zeros and keeps its
    state; a reverse pass starts at the row's own last step. The lengths may be a run-time input."""
    dirs = 2 if direction == "bidirectional" else 1
    lens = np.array([3, 1, SEQ], np.int32)
    x = {"x": random((SEQ, 3, INPUT))}
    h0 = {"h0": random((dirs, 3, HIDDEN), seed=7)}
    inputs, w = (x | {"lens": lens}, weights(op, dirs) | h0) if runtime else (x, weights(op, dirs) | h0 | {"lens": lens})
    check_op(op, inputs, w, outputs=3 if op == "LSTM" else 2, direction=direction, hidden_size=HIDDEN,
             input_order=["x", "w", "r", "b", "lens", "h0"])
