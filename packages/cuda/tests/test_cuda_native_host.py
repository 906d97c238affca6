"""The native pieces of the CUDA host path, checked without a GPU: the core's ``DeviceLauncher``
(kernel arguments packed in C++, the driver called through a function pointer) against the Python
``Launcher`` it replaces, both calling C stand-ins of ``cuLaunchKernelEx``/``cuLaunchKernel`` that
record what they receive (``_C._device_launch_recorder``)."""

from __future__ import annotations

import ctypes
import math
from types import SimpleNamespace

import pytest

from ember import _C
from ember._cuda import _fastcall

_EX_SIG = ctypes.CFUNCTYPE(ctypes.c_int, *_fastcall._SIGNATURES["cuLaunchKernelEx"])
_CLASSIC_SIG = ctypes.CFUNCTYPE(ctypes.c_int, *_fastcall._SIGNATURES["cuLaunchKernel"])


@pytest.fixture
def recorder(monkeypatch):
    """Installs the recording stand-ins as the driver's launch entry points; yields a function that
    resets them with the return codes to give (Ex, classic)."""
    state = _C._device_launch_ex_state()

    def reset(rc_ex=0, rc_classic=0, ex_state=-1, nslots=0):
        ex, classic = _C._device_launch_recorder(rc_ex, rc_classic, nslots)
        lib = SimpleNamespace(cuLaunchKernelEx=_EX_SIG(ex), cuLaunchKernel=_CLASSIC_SIG(classic))
        monkeypatch.setattr(_fastcall, "_LIB", [lib])
        monkeypatch.setattr(_fastcall, "_EX", [None if ex_state == -1 else bool(ex_state)])
        _C._device_launch_ex_state(ex_state)
        return ex, classic

    reset()
    yield reset
    _C._device_launch_ex_state(state)


def _python(kinds, warps, shared, name="k"):
    return _fastcall.Launcher(0x1234, kinds, warps, shared, name)


def _native(kinds, warps, shared, name="k"):
    monkey = _fastcall.NATIVE[0]
    _fastcall.NATIVE[0] = True
    try:
        launcher = _fastcall.make_launcher(0x1234, kinds, warps, shared, name)
    finally:
        _fastcall.NATIVE[0] = monkey
    assert type(launcher) is _C.DeviceLauncher
    return launcher


_CASES = [
    (["ptr", "ptr", "i32"], ((7,), 0, [1 << 40, (1 << 40) + 16, 1000])),
    (["ptr", "fp32", "i32"], ((3, 2), 0x7F00DEAD0000, [2**63 + 8, 1.5, -5])),
    (["ptr", "ptr", "fp64", "i64", "u64", "i32"], ((1, 2, 3), 99, [16, 32, -0.1, -(2**40), 2**64 - 1, 2**31 - 1])),
    (["ptr", "fp32", "fp32", "i64"], ([65535, 1, 1], 0, [0, math.inf, -3, 2**62])),
    (["ptr", "i32", "fp64"], ((5,), 1, [4096, True, 7])),  # a bool and an int where i32 / fp64 go
]


@pytest.mark.parametrize("kinds,call", _CASES)
def test_native_launcher_writes_the_python_launchers_bytes(recorder, kinds, call):
    grid, stream, args = call
    nslots = len(kinds) + 2  # the recorder copies the slots at the call: the launchers may be gone
    seen = []
    for make in (_python, _native):
        recorder(nslots=nslots)
        make(kinds, 4, 1024)(grid, stream, *args)
        seen.append(_C._device_launch_recorded())
    py, nat = seen
    assert py["form"] == nat["form"] == "ex"
    assert nat == py
    assert nat["grid"] == (tuple(grid) + (1, 1))[:3] and nat["block"] == (128, 1, 1) and nat["shared"] == 1024
    assert nat["stream"] == stream and nat["function"] == 0x1234
    assert nat["slots"][-16:] == bytes(16)  # Triton's scratch pointers: null


def test_a_driver_refusing_the_ex_form_switches_every_launcher_to_the_classic_call(recorder):
    recorder(rc_ex=1, rc_classic=0, nslots=4)
    a, b = _native(["ptr", "i32"], 8, 0, "a"), _native(["ptr", "i32"], 1, 0, "b")
    a((2,), 5, 64, 3)
    rec = _C._device_launch_recorded()
    assert rec["form"] == "classic" and rec["calls"] == 2 and rec["block"] == (256, 1, 1)
    assert _C._device_launch_ex_state() == 0
    b((2,), 5, 64, 3)
    assert _C._device_launch_recorded()["calls"] == 3  # straight to cuLaunchKernel
    # The Python launcher's rule on the same refusal: the same calls.
    recorder(rc_ex=1, rc_classic=0, nslots=4)
    _python(["ptr", "i32"], 8, 0)((2,), 5, 64, 3)
    assert _C._device_launch_recorded()["form"] == "classic" and _fastcall._EX[0] is False


def test_launch_errors_go_to_the_driver_error_of_the_plugin(recorder, monkeypatch):
    seen = []

    def raise_for(code, what):
        seen.append((code, what))
        raise RuntimeError(f"CUDA error {code} in {what}")

    monkeypatch.setattr(_fastcall, "raise_for", raise_for)
    recorder(rc_ex=700, ex_state=1)
    with pytest.raises(RuntimeError, match="700"):
        _native(["ptr"], 4, 0, "kern")((1,), 0, 8)
    recorder(rc_classic=719, ex_state=0)
    with pytest.raises(RuntimeError, match="719"):
        _native(["ptr"], 4, 0, "kern")((1,), 0, 8)
    assert seen == [(700, "cuLaunchKernelEx(kern)"), (719, "cuLaunchKernel(kern)")]


def test_native_launcher_refuses_bad_arguments(recorder):
    launcher = _native(["ptr", "i32", "fp32"], 4, 0)
    with pytest.raises(TypeError):
        launcher((1,), 0, 8, 1)  # an argument missing
    with pytest.raises(OverflowError):
        launcher((1,), 0, 8, 2**31, 1.0)  # past i32
    with pytest.raises(OverflowError):
        launcher((1,), 0, -8, 1, 1.0)  # a negative pointer
    with pytest.raises(TypeError):
        launcher((1,), 0, 8, 1.5, 1.0)  # a float where an integer goes
    with pytest.raises(OverflowError):
        launcher((1,), 0, 8, 1, 1e300)  # past float32's range
    with pytest.raises(ValueError):
        launcher((1, 1, 1, 1), 0, 8, 1, 1.0)
    assert _C._device_launch_recorded() is None  # nothing reached the driver
    with pytest.raises(ValueError, match="kind"):
        _C.DeviceLauncher(None, None, 1, "px", 32, 0, "k", print)


def test_python_launcher_is_the_fallback(monkeypatch, recorder):
    monkeypatch.setattr(_fastcall, "NATIVE", [False])
    assert type(_fastcall.make_launcher(1, ["ptr"], 4, 0)) is _fastcall.Launcher
    monkeypatch.setattr(_fastcall, "NATIVE", [True])
    monkeypatch.delattr(_C, "DeviceLauncher")
    assert type(_fastcall.make_launcher(1, ["ptr"], 4, 0)) is _fastcall.Launcher
