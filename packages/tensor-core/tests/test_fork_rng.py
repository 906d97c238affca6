"""ember.random: fork_rng restores the default stream, as torch.random.fork_rng does."""

import pytest
import torch

import ember


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_fork_rng_restores_the_default_stream(lib):
    lib.manual_seed(7)
    expected = lib.rand(4)
    lib.manual_seed(7)
    with lib.random.fork_rng():
        inside = lib.rand(4)
        lib.manual_seed(123)
        lib.randn(10)
    after = lib.rand(4)
    assert lib.equal(inside, expected)
    assert lib.equal(after, expected)  # the draws inside did not advance the outer stream


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_fork_rng_disabled_and_exceptions(lib):
    lib.manual_seed(1)
    with lib.random.fork_rng(enabled=False):
        first = lib.rand(2)
    second = lib.rand(2)
    assert not lib.equal(first, second)
    lib.manual_seed(2)
    state = lib.random.get_rng_state()
    with pytest.raises(ValueError):
        with lib.random.fork_rng(devices=[]):
            lib.rand(3)
            raise ValueError("inside")
    assert lib.equal(lib.random.get_rng_state(), state)
    assert lib.random.initial_seed() == 2
