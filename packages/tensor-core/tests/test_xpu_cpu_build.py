"""``ember.xpu`` answers what torch 2.13's CPU build answers (the session-18 additions)."""

from __future__ import annotations

import pytest
import torch

import ember

_VALUES = [("memory_allocated", ()), ("max_memory_allocated", ()), ("memory_reserved", ()),
           ("max_memory_reserved", ()), ("memory_stats", ()), ("memory_stats_as_nested_dict", ()),
           ("memory_snapshot", ()), ("is_bf16_supported", ()), ("is_bf16_supported", (False,)),
           ("is_tf32_supported", ()), ("get_arch_list", ()), ("get_gencode_flags", ()), ("get_rng_state_all", ()),
           ("set_rng_state_all", ([],)), ("memory_allocated", (0,))]
_RAISING = ["get_device_properties", "get_device_capability", "get_device_name", "get_rng_state", "initial_seed",
            "mem_get_info", "get_per_process_memory_fraction", "init", "reset_peak_memory_stats",
            "reset_accumulated_memory_stats"]


@pytest.mark.parametrize("name, args", _VALUES)
def test_values_as_torch(name, args):
    want = getattr(torch.xpu, name)(*args)
    got = getattr(ember.xpu, name)(*args)
    assert type(got) is type(want) and got == want


@pytest.mark.parametrize("name", _RAISING)
def test_errors_as_torch(name):
    with pytest.raises(Exception) as want:
        getattr(torch.xpu, name)()
    with pytest.raises(type(want.value)) as got:
        getattr(ember.xpu, name)()
    assert str(got.value).replace("ember", "torch").replace("Torch", "torch") == \
        str(want.value).replace("Torch", "torch")


def test_setting_rng_state_does_nothing_as_torch():
    state = ember.get_rng_state()
    assert ember.xpu.set_rng_state(state) is None and torch.xpu.set_rng_state(torch.get_rng_state()) is None
    assert ember.xpu.set_rng_state_all([state, state]) is None
    with pytest.raises(AssertionError, match="not compiled with XPU enabled"):
        ember.xpu.set_per_process_memory_fraction(0.5)
    with pytest.raises(AssertionError, match="not compiled with XPU enabled"):
        torch.xpu.set_per_process_memory_fraction(0.5)


_MTIA = ["is_available", "device_count", "is_initialized", "current_device", "synchronize", "empty_cache",
         "memory_stats", "get_device_capability", "init", "get_rng_state", "memory_allocated", "max_memory_allocated",
         "reset_peak_memory_stats", "is_bf16_supported", "get_device_properties", "current_stream", "default_stream",
         "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state_all", "set_device",
         "set_rng_state", "set_rng_state_all"]


@pytest.mark.parametrize("name", _MTIA)
def test_mtia_answers_as_torch(name):
    def call(lib):
        args = {"manual_seed": (0,), "manual_seed_all": (0,), "set_device": (0,),
                "set_rng_state": (lib.zeros(5, dtype=lib.uint8),), "set_rng_state_all": ([],)}.get(name, ())
        try:
            return ("ok", getattr(lib.mtia, name)(*args))
        except Exception as e:  # noqa: BLE001 - compared with torch's
            return (type(e).__name__, str(e).replace("ember", "Torch"))

    assert call(ember) == call(torch)
    assert sorted(ember.mtia.__all__) == sorted(set(_MTIA))
