"""Target lookup by name."""

import pytest

from compiler.errors import TargetError
from compiler.target import get_target, list_targets


def test_every_listed_target_resolves():
    for name in list_targets():
        assert get_target(name).name == name


def test_unknown_target_names_itself_and_the_known_ones():
    with pytest.raises(TargetError, match=r"unknown target 'cuda:k80'.*cuda:h100"):
        get_target("cuda:k80")
    with pytest.raises(TargetError, match="required"):
        get_target("")


def test_arch_alias_picks_the_canonical_preset():
    assert get_target("cuda:sm_90").name == "cuda:h100"
    assert get_target("cuda:sm_80").name == "cuda:a100"
    assert get_target("CUDA:H100").name == "cuda:h100"
