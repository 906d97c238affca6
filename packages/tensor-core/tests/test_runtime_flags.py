"""The device-availability facade and global switches PyTorch programs touch at start-up."""

import pytest

import ember

from conftest import torch


def test_cuda_facade_matches_a_cpu_only_pytorch():
    assert ember.cuda.is_available() is False
    assert ember.cuda.device_count() == torch.cuda.device_count() == 0
    ember.cuda.manual_seed_all(0)  # accepted, as in PyTorch without a GPU
    with pytest.raises(AssertionError, match="CUDA"):
        ember.cuda.current_device()
    with pytest.raises(AssertionError):
        torch.cuda.current_device()
    with pytest.raises(AssertionError, match="CUDA"):  # PyTorch's CPU build raises AssertionError
        ember.ones(2).to("cuda")


def test_backend_flags_can_be_set():
    ember.backends.cudnn.benchmark = True
    assert ember.backends.cudnn.benchmark is True
    ember.backends.cudnn.benchmark = False
    assert ember.backends.mps.is_available() is False
    assert ember.backends.openmp.is_available() is True


def test_matmul_precision_and_determinism_switches():
    ember.set_float32_matmul_precision("high")
    assert ember.get_float32_matmul_precision() == "high"
    ember.set_float32_matmul_precision("highest")
    with pytest.raises(RuntimeError):
        ember.set_float32_matmul_precision("fastest")
    ember.use_deterministic_algorithms(True)
    assert ember.are_deterministic_algorithms_enabled()
    ember.use_deterministic_algorithms(False)


def test_typename_and_is_nonzero():
    assert ember.typename(ember.ones(1)) == torch.typename(torch.ones(1))
    assert ember.is_nonzero(ember.tensor([1])) is True
    with pytest.raises(RuntimeError):
        ember.is_nonzero(ember.ones(2))


def test_threads_setting_round_trips():
    before = ember.get_num_threads()
    ember.set_num_threads(1)
    assert ember.get_num_threads() == 1
    ember.set_num_threads(before)
    with pytest.raises(ValueError):
        ember.set_num_threads(0)
