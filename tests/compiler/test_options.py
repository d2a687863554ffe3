"""Compile options are checked up front, and every problem names the option."""

import pytest

from compiler.errors import OptionsError
from compiler.options import CompileOptions


def test_defaults_and_round_trip():
    o = CompileOptions.from_dict({"input_shapes": {"x": [1, 3]}, "top_k": 3})
    assert o.input_shapes == {"x": [1, 3]} and o.top_k == 3 and o.validate
    assert CompileOptions.from_dict(o.to_dict()) == o


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"tiles": 3}, "tiles"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": True}, "top_k"),
        ({"tolerance": 2}, "tolerance"),
        ({"validate": "yes"}, "validate"),
        ({"input_shapes": {"x": [1, -2]}}, "input_shapes"),
        ({"input_shapes": [1, 2]}, "input_shapes"),
        ({"threads": 0}, "threads"),
        ({"split_k": 1}, "split_k"),
    ],
)
def test_bad_options_name_the_option(bad, named):
    with pytest.raises(OptionsError, match=named):
        CompileOptions.from_dict(bad)


def test_options_must_be_an_object():
    with pytest.raises(OptionsError):
        CompileOptions.from_dict([1, 2])  # type: ignore[arg-type]


def test_a_thread_count_is_a_codegen_option():
    """Kernels are scheduled for the cores a run uses, so the count is part of every kernel key."""
    assert CompileOptions().codegen_key() == {}
    assert CompileOptions.from_dict({"threads": 1}).codegen_key() == {"threads": 1}
