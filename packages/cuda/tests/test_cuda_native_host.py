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

_NATIVE = pytest.mark.skipif(not hasattr(_C, "DeviceLauncher"), reason="the core was built without the native path")
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


@_NATIVE
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


@_NATIVE
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


@_NATIVE
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


@_NATIVE
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
    monkeypatch.delattr(_C, "DeviceLauncher", raising=False)
    assert type(_fastcall.make_launcher(1, ["ptr"], 4, 0)) is _fastcall.Launcher


# -- the whole host path, native against Python ------------------------------------------------------

# The fake host with every kernel launch recorded: the start of each program below.
_RECORDED_HOST = r"""
import ctypes, json, os, sys
sys.path.insert(0, sys.argv[1])
import host_cuda_fake
host_cuda_fake.install()
import ember
from ember import _C
from ember._cuda import _compile, _fastcall

ex, classic = _C._device_launch_recorder(0, 0, -1, True)
lib = _fastcall._LIB[0]  # PYFUNCTYPE: the recorder's log builds Python objects, so ctypes must keep the GIL
lib.cuLaunchKernelEx = ctypes.PYFUNCTYPE(ctypes.c_int, *_fastcall._SIGNATURES["cuLaunchKernelEx"])(ex)
lib.cuLaunchKernel = ctypes.PYFUNCTYPE(ctypes.c_int, *_fastcall._SIGNATURES["cuLaunchKernel"])(classic)
ids = {}

def load(cubin, meta, kinds, device):  # a handle per kernel whose low byte is its slot count
    fid = ids.setdefault(meta["name"] + repr(kinds), ((len(ids) + 1) << 8) | (len(kinds) + 2))
    return _fastcall.make_launcher(fid, kinds, meta["num_warps"], meta["shared"], meta["name"])

_compile.load = load
"""

_PROGRAM = _RECORDED_HOST + r"""
from types import SimpleNamespace
from ember._cuda import _allocator
ember.manual_seed(0)
model = ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.GELU(), ember.nn.LayerNorm(32),
                            ember.nn.Linear(32, 8)).to("cuda")
opt = ember.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
x = ember.randn(4, 16).to("cuda")
stats = []
for step in range(2):
    with ember.autocast("cuda", dtype=ember.bfloat16):
        loss = model(x).float().softmax(-1).sum()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    y = (x * 2 + 1).relu_()
    y.add_(x, alpha=0.5)
    z = y[:, ::2].contiguous().sum(0)
    del y, z, loss
    stats.append(ember.cuda.memory_stats())
log = [(f, g, b, s, st, fn, sl.hex()) for f, g, b, s, st, fn, sl in _C._device_launch_log()]
from ember._cuda import _storage
from ember._src.device import get_backend
print(json.dumps({"native": [type(_fastcall.make_launcher(1, ["ptr"], 4, 0)).__name__, _allocator.NATIVE],
                  "empty_hook": get_backend("cuda").empty is _storage.empty,
                  "log": log, "stats": stats}))
"""


def _fake_host_runs(tmp_path, program: str, envs: list) -> list:
    """Runs ``program`` (it prints a JSON line last) once per environment on the fake CUDA host
    (benchmarks/host_cuda_fake.py), each in a fresh process; returns the parsed lines."""
    pytest.importorskip("triton")
    # the programs' packages above tensor-core (absent when ember-cuda is tested alone)
    for used, module in ((".nn.", "ember.nn"), (".optim.", "ember.optim"), ("ember.compile(", "ember.compiler")):
        if used in program:
            pytest.importorskip(module)
    import ember

    if ember.cuda.is_available():
        pytest.skip("the fake host replaces the driver of a process without a GPU")
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    benchmarks = Path(__file__).resolve().parents[3] / "benchmarks"
    script = tmp_path / "prog.py"
    script.write_text(program)
    runs = []
    for extra in envs:
        out = subprocess.run([sys.executable, str(script), str(benchmarks)], env=dict(os.environ, **extra),
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return runs


@_NATIVE
def test_native_host_path_launches_and_allocates_as_the_python_one(tmp_path):
    """One small training program on the fake CUDA host (benchmarks/host_cuda_fake.py: no GPU, kernels
    compiled for sm_90), with the native launcher and allocation path and with the Python ones: the
    same launches (every argument byte, grid, block, shared memory, stream) and the same memory
    statistics."""
    nat, py = _fake_host_runs(tmp_path, _PROGRAM, [
        {"EMBER_CUDA_NATIVE_LAUNCH": native, "EMBER_CUDA_NATIVE_ALLOC": native} for native in ("1", "0")])
    assert nat["native"] == ["DeviceLauncher", True] and py["native"] == ["Launcher", False]
    # new_empty_tensor's per-op path (the hook was once lost in a merge, sending every CUDA result through
    # the backend's allocate and the generic path)
    assert nat["empty_hook"] and py["empty_hook"]
    assert len(nat["log"]) > 30
    assert nat["log"] == py["log"]
    assert nat["stats"] == py["stats"]


# -- the allocation path ---------------------------------------------------------------------------


def _fake_allocator(native: bool):
    from ember._cuda import _allocator

    alloc = _allocator.DeviceAllocator(0, _allocator._Config(None))
    nxt, freed = [1 << 40], []

    def device_alloc(size, requested):
        if requested == 999_999_999:
            raise _allocator.OutOfMemoryError("fake: out of memory")
        nxt[0] += size
        alloc.reserved += size
        return nxt[0]

    def device_free(block):
        freed.append(block.ptr)
        alloc.reserved -= block.size

    alloc._device_alloc, alloc._device_free = device_alloc, device_free
    return alloc, freed


def _counting(fn, name, calls):
    def counted(*args):
        calls.append(name)
        return fn(*args)

    return counted


def _pools(alloc):
    return {repr(k): [b.ptr for b in v] for k, v in alloc.free.items()}


@pytest.mark.skipif(not hasattr(_C, "DeviceStorage"), reason="the core was built without the native path")
def test_native_allocation_matches_the_python_allocator():
    """The same sequence of allocations and frees (two streams, every size class, a CUDA-graph capture
    pool, caching turned off, an out-of-memory error) through ``_C._device_storage_new`` and the storage's
    native deallocation, and through the Python fallback: the same blocks, pools and statistics."""
    from ember._cuda import _allocator, _storage

    if not _allocator.NATIVE:
        pytest.skip("EMBER_CUDA_NATIVE_ALLOC=0")

    class PyStorage(_storage._PyStorageBase):
        __slots__ = ()

    results = []
    for native in (True, False):
        alloc, freed = _fake_allocator(native)
        new = _C._device_storage_new if native else _storage._py_storage_new
        cls = _storage.CudaStorage if native else PyStorage
        trace = []
        python_calls = []
        for name in ("malloc", "release"):
            setattr(alloc, name, _counting(getattr(alloc, name), name, python_calls))

        def make(n, stream=0, inference=False):
            s = new(cls, alloc, n, "dev", stream, inference)  # noqa: B023
            trace.append((s._ptr, s._nbytes, s.device, s.version, s.inference, s._block is None))  # noqa: B023
            return s

        sizes = [0, 1, 4, 511, 512, 513, 100_000, 1 << 20, (1 << 20) + 1, 3 << 20, 5_000_000, 67_000_000]
        live = [make(n) for n in sizes] + [make(n, stream=7) for n in sizes[:6]]
        trace.append(dict(alloc.stats))
        del live[::2]
        trace.append((dict(alloc.stats), _pools(alloc)))
        live += [make(n) for n in reversed(sizes)] + [make(n, stream=7, inference=True) for n in sizes]
        trace.append((dict(alloc.stats), _pools(alloc)))
        if native:  # no capture, nothing pending, caching on: all of it ran natively
            assert python_calls == []
        # A capture on stream 7: its allocations come from (and go back to) the graph's pool.
        alloc.capturing[7] = "pool1"
        alloc.retain_pool("pool1")
        cap = [make(n, stream=7) for n in sizes[:8]] + [make(300, stream=0)]
        del cap[1::2]
        trace.append((dict(alloc.stats), _pools(alloc)))
        alloc.capturing.pop(7)
        del cap
        alloc.release_pool("pool1")
        trace.append((dict(alloc.stats), _pools(alloc)))
        with pytest.raises(_allocator.OutOfMemoryError):
            make(999_999_999)
        trace.append((dict(alloc.stats), _pools(alloc)))
        alloc.caching = False
        del live[: len(live) // 2]
        trace.append((dict(alloc.stats), _pools(alloc), list(freed)))
        del live
        trace.append((dict(alloc.stats), _pools(alloc), list(freed)))
        results.append(trace)
    assert results[0] == results[1]
    assert results[0][-1][0]["allocated"] == 0 and results[0][-1][0]["active_blocks"] == 0


def test_native_size_classes_match_round_size():
    from ember._cuda import _allocator

    if not hasattr(_C, "_device_round_size"):
        pytest.skip("the core was built without the native path")
    for divisions in (1, 2, 4, 8, 16):
        for n in list(range(1, 3000, 7)) + [(1 << k) + d for k in range(10, 40) for d in (-1, 0, 1, 12345)]:
            want = max(512, (n + 511) & ~511) if n <= 1 << 20 else _allocator.round_size(n, divisions)
            assert _C._device_round_size(n, divisions) == want, (n, divisions)


def test_storage_fields_and_subclasses():
    from ember._cuda import _storage

    alloc, _ = _fake_allocator(True)
    s = _storage._new_storage(_storage.CudaStorage, alloc, 100, "dev", 0, False)
    s.version += 2
    s.inference = True
    assert (s.version, s.inference, s.nbytes(), len(s), s.data_ptr() == s._ptr, s.device) == (2, True, 100, 100,
                                                                                                 True, "dev")
    alias = s.graph_alias()
    assert alias.aliased and alias._ptr == s._ptr and alias.inference
    assert alloc.active_blocks == 1
    del alias, s
    assert alloc.active_blocks == 0 and alloc.allocated == 0
    import weakref

    t = _storage._new_storage(_storage.CudaStorage, alloc, 8, "dev", 0, False)
    ref = weakref.ref(t)
    del t
    assert ref() is None and alloc.active_blocks == 0



@pytest.mark.skipif(not hasattr(_C, "_device_empty_front"), reason="the core was built without the native path")
def test_native_new_empty_front_makes_the_python_functions_tensor_and_passes_the_rest_on():
    """``_C._device_empty_front`` (``_storage.new_empty``'s common case in C): a fresh contiguous tensor with the
    cached strides, the device object of the device table, a block of the device's allocator on the current stream
    and the inference flag; every other call (keywords, zero, a shape not cached, another device than the last
    ``new_empty_tensor`` one, a context to make current, an unknown device or dtype, a size over the limit) reaches
    the Python function with its own arguments."""
    import ember
    from ember import _C
    from ember._cuda import _storage

    alloc, _ = _fake_allocator(True)
    dev, other = ember.device("cuda", 0), ember.device("cuda", 1)
    calls = []

    def fallback(*args, **kwargs):
        calls.append((args, kwargs))
        return "fallback"

    def empty(*args):  # the backend's `empty` last handed `dev` (device.LAST_EMPTY)
        raise AssertionError("not called")

    shapes = {(2, 3): ((3, 1), 6), (): ((), 1), (4,): ((1,), 4)}
    last = [dev, empty]
    driver_tls = SimpleNamespace(index=0)
    streams_tls = SimpleNamespace(streams=None)
    inference_used, grad_state = [False], SimpleNamespace(inference=False)
    front = _C._device_empty_front((fallback, shapes, last, empty, 1000, driver_tls, {0: dev}, {0: alloc},
                                    streams_tls, inference_used, grad_state, _storage.CudaStorage))

    t = front((2, 3), ember.float32, dev)
    assert type(t) is ember.Tensor and t._device is dev and t.dtype is ember.float32
    assert (t._shape, t._stride, t._offset, t._storage._nbytes, t._storage.inference) == ((2, 3), (3, 1), 0, 24, False)
    assert type(t._storage) is _storage.CudaStorage and t._storage._block.stream == 0 and calls == []
    assert front((), ember.bfloat16, dev, False)._storage._nbytes == 2
    # a stream made current for the device (and one for another device), then inference mode
    streams_tls.streams = {0: SimpleNamespace(cuda_stream=77), 1: SimpleNamespace(cuda_stream=5)}
    assert front((4,), ember.int64, dev)._storage._block.stream == 77
    inference_used[0] = grad_state.inference = True
    assert front((4,), ember.int64, dev)._storage.inference
    grad_state.inference = False
    assert not front((4,), ember.int64, dev)._storage.inference
    assert calls == [] and alloc.active_blocks == 1  # (t: the other results are gone)

    passed_on = [
        (((2, 3), ember.float32, dev), {"zero": True}),
        (((2, 3), ember.float32, dev, True), {}),
        (((2, 3), ember.float32, dev, 0), {}),
        (([2, 3], ember.float32, dev), {}),
        (((5, 5), ember.float32, dev), {}),
        (((2, 3), ember.float32, other), {}),
        (((2, 3), "float32", dev), {}),
        (((2, 3), ember.float32), {}),
    ]
    for args, kwargs in passed_on:
        calls.clear()
        assert front(*args, **kwargs) == "fallback" and calls == [(args, kwargs)], (args, kwargs)
    shapes[(300,)] = ((1,), 300)  # 1200 bytes of float32 > the limit of 1000; 600 of bfloat16 are not
    calls.clear()
    assert front((300,), ember.float32, dev) == "fallback" and len(calls) == 1
    assert front((300,), ember.bfloat16, dev)._storage._nbytes == 600 and len(calls) == 1
    unknown = _C._device_empty_front((fallback, shapes, last, empty, 1000, driver_tls, {}, {0: alloc}, streams_tls,
                                      inference_used, grad_state, _storage.CudaStorage))
    for change in ("driver", "device", "last_fn"):
        calls.clear()
        made = front
        if change == "driver":
            driver_tls.index = 1  # another device's context is current: the Python function makes dev's current
        elif change == "device":
            made = unknown  # a device not in the table yet
        else:
            last[1] = fallback  # new_empty_tensor last handed dev to another backend function
        assert made((2, 3), ember.float32, dev) == "fallback" and len(calls) == 1, change
        driver_tls.index = 0
    last[1] = empty
    with pytest.raises(TypeError):
        front(([1],), ember.float32, dev)  # unhashable: the dict lookup's TypeError, as the Python function's
    with pytest.raises(TypeError):
        _C._device_empty_front((fallback, shapes))
    with pytest.raises(TypeError):
        _C._device_empty_front((fallback, shapes, last, empty, 1000, driver_tls, {}, {}, streams_tls, inference_used,
                                grad_state, object))
    if _storage._EMPTY_FRONT is not None:  # the CUDA kernels allocate through it
        from ember._cuda import _ops_pointwise, _ops_rows

        assert _storage.new_empty is _ops_rows.new_empty_tensor is _ops_pointwise.new_empty_tensor
        assert _storage.new_empty is not _storage._py_new_empty


@_NATIVE
def test_concurrent_launches_do_not_share_argument_buffers():
    """Each call packs its arguments on its own stack and calls the driver without the GIL: launches of
    one launcher from several threads reach the driver whole."""
    import threading

    state = _C._device_launch_ex_state()
    ex, classic = _C._device_launch_recorder(0, 0, -1, True)
    try:
        launcher = _C.DeviceLauncher(ex, classic, (7 << 8) | 5, "pli", 128, 0, "k", print)

        def work(tid):
            for i in range(300):
                launcher((tid + 1,), 0, tid << 32 | i, -tid * 1000 - i, tid)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        log = _C._device_launch_log()
    finally:
        _C._device_launch_recorder()
        _C._device_launch_ex_state(state)
    assert len(log) == 1200
    import struct

    for form, grid, block, shared, stream, fn, slots in log:
        assert (form, block, shared, stream, fn) == ("ex", (128, 1, 1), 0, 0, (7 << 8) | 5)
        p, q, tid, high, s1, s2 = struct.unpack("<QqiiQQ", slots)  # ptr, i64, i32 (+ 4 zero bytes), scratch
        assert grid == (tid + 1, 1, 1) and p >> 32 == tid and q == -tid * 1000 - (p & 0xFFFFFFFF)
        assert (high, s1, s2) == (0, 0, 0)


# -- compiled graphs: the wrapper's launch sites and allocation front -----------------------------------

_COMPILED = _RECORDED_HOST + r"""
from ember.compiler.inductor import _triton_runtime
fallbacks = [0]
original = _triton_runtime.TritonKernel._site_fallback

def counted(self, site, *args):
    fallbacks[0] += 1
    return original(self, site, *args)

_triton_runtime.TritonKernel._site_fallback = counted
ember.manual_seed(0)
model = ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.GELU(), ember.nn.LayerNorm(32),
                            ember.nn.Linear(32, 8)).to("cuda")
opt = ember.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
compiled = ember.compile(model)
x = ember.randn(4, 16).to("cuda")
stats, per_step = [], []
for step in range(3):
    before = fallbacks[0]
    with ember.autocast("cuda", dtype=ember.bfloat16):
        loss = (compiled(x).float() * 1.5).tanh().sum()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    with ember.inference_mode():
        out = compiled(x)
        inference = out.is_inference()
        del out
    del loss
    per_step.append(fallbacks[0] - before)
    stats.append(ember.cuda.memory_stats())
log = [(f, g, b, s, st, fn, sl.hex()) for f, g, b, s, st, fn, sl in _C._device_launch_log()]
print(json.dumps({"log": log, "stats": stats, "fallbacks": per_step, "inference": inference}))
"""


@_NATIVE
@pytest.mark.skipif(not hasattr(_C, "DeviceLaunchSite"), reason="the core was built without launch sites")
def test_compiled_wrapper_launches_natively_as_the_python_path(tmp_path):
    """A small model under ember.compile on the fake CUDA host (forward, backward, an inference-mode call):
    with the wrapper's native launch sites and allocation front (``config.triton.native_launch``) and
    without: the same launches (every argument byte, grid, block, stream) and memory statistics; the sites
    leave the Python path after their first call."""
    cache = str(tmp_path / "cache")  # the last run links the graph cache's wrappers
    nat, py, cached = _fake_host_runs(tmp_path, _COMPILED, [
        {"EMBER_INDUCTOR_NATIVE_LAUNCH": native, "EMBER_CACHE_DIR": cache} for native in ("1", "0", "1")])
    assert len(nat["log"]) > 10
    assert nat["log"] == py["log"] == cached["log"]
    assert nat["stats"] == py["stats"] == cached["stats"]
    assert nat["inference"] and py["inference"]
    # native: each site's first call goes through Python (tuning, compiling), later steps never do
    assert nat["fallbacks"][0] > 0 and nat["fallbacks"][1:] == [0, 0]
    assert cached["fallbacks"][1:] == [0, 0]
    assert py["fallbacks"] == [0, 0, 0]  # the Python launch path has no sites


class _Kernel:
    """A TritonKernel stand-in: its Python launch packs through a launcher as the runtime does."""

    def __init__(self, launcher, stream):
        self.launcher, self.stream, self.calls = launcher, stream, []

    def fallback(self, site, *args):
        self.calls.append(args)
        values = [a.data_ptr() if hasattr(a, "data_ptr") else a for a in args] + [site.xnumel]
        if all(isinstance(v, int) for v in values):
            self.launcher((7, 1, 1), self.stream, *values)


@_NATIVE
@pytest.mark.skipif(not hasattr(_C, "DeviceLaunchSite"), reason="the core was built without launch sites")
def test_launch_site_packs_tensors_as_the_python_launch(recorder):
    """``_C.DeviceLaunchSite``: unarmed, every call goes to the fallback; armed, a call of the armed alignment
    pattern launches natively with the bytes the Python path writes (tensor addresses with their offsets,
    ints, the fixed xnumel; 50 arguments); a stream of None, a non-tensor pointer argument, an unpackable
    size or another alignment pattern takes the fallback."""
    import ember
    from ember._cuda import _storage

    alloc, _ = _fake_allocator(True)
    dev = ember.device("cuda", 0)
    tensors = [_C._device_tensor_new(_storage.CudaStorage, alloc, 4096, dev, 5, False, (64, 16), (16, 1), ember.float32)
               for _ in range(40)]
    assert all(t._storage._ptr % 512 == 0 for t in tensors)
    view = ember._src.tensor.make_view(tensors[0], (16,), (1,), 4)  # 16 bytes in: still aligned
    args = [view, *tensors[1:40], *[16 * i for i in range(10)]]
    kinds = ["ptr"] * 40 + ["i64"] * 10 + ["i32"]  # xnumel last
    nslots = len(kinds) + 2
    launcher = _native(kinds, 4, 0)
    kernel = _Kernel(launcher, 5)
    site = _C.DeviceLaunchSite(kernel.fallback, 4096)
    recorder(nslots=nslots)
    site(5, *args)  # unarmed: Python
    py = _C._device_launch_recorded()
    assert len(kernel.calls) == 1 and site.launches == 0
    site.arm(launcher, 7, (1 << 51) - 1)
    recorder(nslots=nslots)
    site(5, *args)
    assert _C._device_launch_recorded() == py and site.launches == 1 and len(kernel.calls) == 1
    assert py["slots"][:8] == (tensors[0]._storage._ptr + 16).to_bytes(8, "little")
    for other in ([None, *args], [5, 3, *args[1:]], [5, *args[:40], "x", *args[41:]],
                  [5, *args[:40], 8, *args[41:]]):
        site(*other)
    assert len(kernel.calls) == 5 and site.launches == 1  # the last one: 8 is no multiple of 16: Python
    site.arm(None)
    site(5, *args)
    assert len(kernel.calls) == 6 and site.launcher is None
    with pytest.raises(TypeError):
        site.arm(kernel.fallback, 7, 0)
    with pytest.raises(TypeError):
        site()


@pytest.mark.skipif(not hasattr(_C, "_device_tensor_new"), reason="the core was built without the native path")
def test_device_tensor_new_is_storage_new_plus_make_tensor():
    import ember
    from ember._cuda import _storage

    alloc, _ = _fake_allocator(True)
    dev = ember.device("cuda", 0)
    t = _C._device_tensor_new(_storage.CudaStorage, alloc, 24, dev, 0, True, (2, 3), (3, 1), ember.float32)
    assert type(t) is ember.Tensor and type(t._storage) is _storage.CudaStorage
    assert (t.shape, t.stride(), t.dtype, t._device, t._offset) == ((2, 3), (3, 1), ember.float32, dev, 0)
    assert t._storage._nbytes == 24 and t._storage.inference and alloc.active_blocks == 1
    del t
    assert alloc.active_blocks == 0
    with pytest.raises(TypeError):
        _C._device_tensor_new(_storage.CudaStorage, alloc, 24, dev, 0, False, [2, 3], (3, 1), ember.float32)
    with pytest.raises(TypeError):
        _C._device_tensor_new(_storage.CudaStorage, alloc, 24, dev, 0, False, (2, 3), (3, 1), "float32")
    assert alloc.active_blocks == 0


# -- autocast's casts ------------------------------------------------------------------------------

_AUTOCAST = _RECORDED_HOST + r"""
from ember._src import autocast
if os.environ.get("CAST_THROUGH_TO"):  # the reference: every cast through Tensor.to, as before
    def _via_to(t, to, dt, state):
        d = t.dtype
        if d is to or not d.is_floating_point or d is ember.float64 or t._device.type != dt:
            return t
        cacheable = (state.cache_enabled and not state.capturing and d is ember.float32 and t._requires_grad
                     and t._base is None and t.is_leaf)
        if cacheable and id(t) in state.cache and state.cache[id(t)][0] is t:
            return state.cache[id(t)][1]
        out = t.to(to)
        if cacheable:
            state.cache[id(t)] = (t, out)
        return out
    autocast._cast = _via_to
ember.manual_seed(0)
lin = ember.nn.Linear(16, 16).to("cuda")
x = ember.randn(4, 16).to("cuda")
x64 = ember.randn(4, 16, dtype=ember.float64).to("cuda")
with ember.autocast("cuda", dtype=ember.bfloat16):
    h = lin(lin(x))  # the weight twice: one cast, cached for the region
    m = ember.mm(x64, x64.t())  # float64 is never cast
    out = (h.float().sum() + m.sum())
nodes, seen, todo = [], set(), [out.grad_fn]
while todo:
    n = todo.pop()
    if n is None or id(n) in seen:
        continue
    seen.add(id(n))
    nodes.append(type(n).__name__)
    todo.extend(f for f, _ in n.next_functions)
out.backward()
log = [(f, g, b, s, st, fn, sl.hex()) for f, g, b, s, st, fn, sl in _C._device_launch_log()]
print(json.dumps({"nodes": sorted(nodes), "dtypes": [str(h.dtype), str(m.dtype), str(lin.weight.grad.dtype)],
                  "casts": nodes.count("ToCopyBackward0"), "log": log}))
"""


@_NATIVE
def test_autocast_casts_on_cuda_as_tensor_to(tmp_path):
    """Autocast casts a plain CUDA tensor by calling its _to_copy directly (no Tensor.to frame): the same
    graph, dtypes and launches (every argument byte) as casting through Tensor.to; a weight used twice in
    a region is cast once (the region's cache), float64 never."""
    fast, ref = _fake_host_runs(tmp_path, _AUTOCAST, [{}, {"CAST_THROUGH_TO": "1"}])
    assert fast["dtypes"] == ["ember.bfloat16", "ember.float64", "ember.float32"]
    assert fast["casts"] == 3  # x, the weight and the bias once each (the second linear's input is bf16 already)
    assert fast["nodes"] == ref["nodes"] and fast["log"] == ref["log"] and len(fast["log"]) > 5


_LAYER_NORM_GRADS = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import host_cuda_fake
host_cuda_fake.install()
import ember
from ember._cuda import _ops_rows

launches = {}
memo = _ops_rows._memo

def counting(key, build):
    launcher = memo(key, build)

    def launch(*args):
        launches[key[0]] = launches.get(key[0], 0) + 1
        return launcher(*args)

    return launch

_ops_rows._memo = counting
ln = ember.nn.LayerNorm(32).to("cuda")
runs = {}
for needs in (False, True):
    launches.clear()
    x = ember.randn(4, 32).to("cuda").requires_grad_(needs)
    ln(x).sum().backward()
    runs[str(needs)] = dict(launches)
print(json.dumps(runs))
"""


def test_layer_norm_backward_runs_its_kernel_when_only_the_weight_needs_a_gradient(tmp_path):
    """The weight's gradient is summed from the backward kernel's per-row products: with an input that needs
    no gradient the kernel must still run (it was skipped, leaving the weight's gradient unwritten memory)."""
    (runs,) = _fake_host_runs(tmp_path, _LAYER_NORM_GRADS, [{}])
    assert runs["False"].get("layer_norm_bwd") == 1 and runs["True"].get("layer_norm_bwd") == 1


# -- cross-entropy: the backward takes the forward's saved log-sum-exp ---------------------------------

_CROSS_ENTROPY_LSE = _RECORDED_HOST + r"""
built = []
original_kernel = _compile.kernel

def recording(source, name, signature, constexprs=None, *args, **kwargs):
    launcher = original_kernel(source, name, signature, constexprs, *args, **kwargs)  # compiled for sm_90
    if "lse_out" in signature or "saved" in signature:
        built.append({"forward": "lse_out" in signature, "constexprs": dict(constexprs or {})})
    return launcher

_compile.kernel = recording
ember.zeros(1).to("cuda")  # the CUDA kernels are registered with the first CUDA tensor
saved = []
original_backward = ember.ops._class_nll_backward.kernels["cuda"]

def spy(*args):
    saved.append(None if len(args) < 8 or args[7] is None else [str(args[7].dtype), list(args[7].shape)])
    return original_backward(*args)

ember.ops._class_nll_backward.kernels["cuda"] = spy
F = ember.nn.functional
for dtype, kwargs in ((ember.float32, {}), (ember.bfloat16, {"label_smoothing": 0.1}),
                      (ember.float16, {"ignore_index": 1, "reduction": "sum"})):
    x = ember.randn(6, 5000).to(dtype).to("cuda").requires_grad_()
    y = ember.tensor([0, 1, 2, 3, 4, 5]).to("cuda")
    F.cross_entropy(x, y, **kwargs).backward()
x = ember.randn(2, 7, 3).to("cuda").requires_grad_()
F.cross_entropy(x, ember.zeros(2, 3, dtype=ember.int64).to("cuda")).backward()  # classes on dim 1 of N-d
x = ember.randn(4, 7).log_softmax(1).to("cuda").requires_grad_()
F.nll_loss(x, ember.tensor([0, 1, 2, 3]).to("cuda")).backward()  # log-probabilities: no lse
print(json.dumps({"built": built, "saved": saved}))
"""


def test_cross_entropy_backward_launches_with_the_saved_lse(tmp_path):
    """On the fake CUDA host (kernels compiled for sm_90): cross_entropy's backward kernel is built
    and launched with the forward's float32 log-sum-exp (HAS_LSE, no recomputation of the row's
    max and sum) for float32, bfloat16, float16 and N-d scores, and without one for nll_loss on
    log-probabilities."""
    (run,) = _fake_host_runs(tmp_path, _CROSS_ENTROPY_LSE, [{}])
    assert run["saved"] == [["ember.float32", [6]]] * 3 + [["ember.float32", [2, 3]], None], run["saved"]
    backward = [b["constexprs"]["HAS_LSE"] for b in run["built"] if not b["forward"]]
    forward = [b for b in run["built"] if b["forward"]]
    assert len(forward) == 5 and backward == [True] * 4 + [False], run["built"]


# -- the fused Adam/AdamW step's host path (Note [fused Adam plans]) ---------------------------------

_ADAM_PROGRAM = _RECORDED_HOST + r"""
from ember._cuda import _ops_optim
if sys.argv[2] == "general":  # every step through the per-parameter path (the plans' reference)
    _ops_optim._plan_for = lambda params: None
ember.manual_seed(0)
model = ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.GELU(), ember.nn.LayerNorm(32),
                            ember.nn.Linear(32, 8), ember.nn.Linear(8, 3)).to("cuda")
extra = ember.nn.Linear(3, 5).to("cuda", dtype=ember.float64)
mixed = sys.argv[3] == "mixed"
params = list(model.parameters()) + (list(extra.parameters()) if mixed else [])
opt = ember.optim.AdamW(params, lr=1e-3, weight_decay=0.1, fused=True)
x = ember.randn(4, 16).to("cuda")
per_step, logged = [], []
for step in range(4):
    loss = model(x).sum()
    if mixed:
        loss = loss + extra(ember.ones(2, 3, dtype=ember.float64).to("cuda")).sum().float()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if step == 2:  # a parameter whose counter is behind: steps differ (per-chunk step sizes)
        opt.state[params[1]]["step"].sub_(1)
    logged += _C._device_launch_log()  # (the log is handed over and cleared)
    opt.step()
    launched = _C._device_launch_log()
    per_step.append(len(launched))
    logged += launched
log = [(f, g, b, s, st, fn, sl.hex()) for f, g, b, s, st, fn, sl in logged + _C._device_launch_log()]
steps = [opt.state[p]["step"].item() for p in params]
versions = [opt.state[p]["step"]._version for p in params]
print(json.dumps({"log": log, "per_step": per_step, "steps": steps, "versions": versions,
                  "ids": {k: v for k, v in ids.items()}, "stats": ember.cuda.memory_stats()}))
"""


@_NATIVE
def test_fused_adam_plans_launch_as_the_per_parameter_path(tmp_path):
    """GPT-2's optimizer step goes through a plan kept per parameter list (one launch per device and dtype,
    the step counters and addresses read natively): on the fake CUDA host it launches what the
    per-parameter path launches (every argument byte), including a step where the counters differ."""
    plan, general = _fake_host_runs(tmp_path, _ADAM_PROGRAM.replace("sys.argv[2]", "'plan'").replace(
        "sys.argv[3]", "'one'"), [{}])[0], _fake_host_runs(tmp_path, _ADAM_PROGRAM.replace(
            "sys.argv[2]", "'general'").replace("sys.argv[3]", "'one'"), [{}])[0]
    assert plan["per_step"] == [1, 1, 1, 1]  # one chunked launch for the 8 parameters
    assert plan["log"] == general["log"]
    assert plan["stats"] == general["stats"]
    assert plan["steps"] == general["steps"] == [4.0, 3.0] + [4.0] * 6
    assert plan["versions"] == general["versions"]


@_NATIVE
def test_fused_adam_plans_group_by_dtype(tmp_path):
    """float32 and float64 parameters in one group: one launch per dtype (the per-parameter path refuses a
    mixed list, so the core's composite ran: ~8 launches per parameter)."""
    (run,) = _fake_host_runs(tmp_path, _ADAM_PROGRAM.replace("sys.argv[2]", "'plan'").replace(
        "sys.argv[3]", "'mixed'"), [{}])
    assert run["per_step"] == [2, 2, 2, 2]
    assert run["steps"] == [4.0, 3.0] + [4.0] * 8


def test_native_optimizer_helpers_on_cpu():
    """_C._cpu_scalars / _dense_ptrs / _bump_versions (the optimizers' per-step bookkeeping) against the
    per-tensor operations they stand for; anything they do not take answers None with nothing written."""
    import ember

    a, b = ember.tensor(1.5), ember.tensor(2.0, dtype=ember.float64)
    va, vb = a._version, b._version
    assert _C._cpu_scalars([a, b], False) == [1.5, 2.0] and (a._version, b._version) == (va, vb)
    assert _C._cpu_scalars([a, b], True) == [2.5, 3.0]
    assert (a.item(), b.item(), a._version, b._version) == (2.5, 3.0, va + 1, vb + 1)
    big = ember.tensor(16777216.0)  # float32 arithmetic, as add_: 2^24 + 1 rounds back
    assert _C._cpu_scalars((big,), True) == [16777216.0]
    for bad in (ember.tensor(3), ember.zeros(2), ember.zeros(2)[:1], "x"):
        assert _C._cpu_scalars([a, bad], True) is None
    assert a.item() == 2.5 and a._version == va + 1

    x, y = ember.zeros(3, 4), ember.zeros(4, 3)
    assert _C._dense_ptrs([x, y], x.dtype, x._device, None) == (x.data_ptr(), y.data_ptr())
    assert _C._dense_ptrs([x, y], x.dtype, x._device, (x._shape, y._shape)) == (x.data_ptr(), y.data_ptr())
    assert _C._dense_ptrs([x[1:]], x.dtype, x._device, None) == (x[1:].data_ptr(),)
    assert _C._dense_ptrs([x, y], x.dtype, x._device, (x._shape, x._shape)) is None
    assert _C._dense_ptrs([x, y.t()], x.dtype, x._device, None) is None
    assert _C._dense_ptrs([x, y.double()], x.dtype, x._device, None) is None
    assert _C._dense_ptrs([x, 1], x.dtype, x._device, None) is None
    with pytest.raises(TypeError):
        _C._dense_ptrs(x, x.dtype, x._device, None)

    vx, vy = x._version, y._version
    _C._bump_versions([x], (y, x))
    assert (x._version, y._version) == (vx + 2, vy + 1)


# -- several-output calls recorded natively ------------------------------------------------------------

_MULTI_OUTPUT_PROGRAM = r"""import json, os, sys
sys.path.insert(0, sys.argv[1])
import host_cuda_fake
host_cuda_fake.install()
import ember
import ember.autograd._recording as _recording
python_calls = []
_computed = _recording.record_computed
_recording.record_computed = lambda *a: (python_calls.append(a[0].name), _computed(*a))[1]
# anomaly mode: autograd's Python recording
ember.autograd.set_detect_anomaly(os.environ["EMBER_TEST_RECORDING"] == "python")
ember.manual_seed(0)
F = ember.nn.functional
x = ember.randn(2, 8, 32).to("cuda").requires_grad_()
w = ember.randn(32).to("cuda").requires_grad_()
b = ember.randn(32).to("cuda").requires_grad_()
q = ember.randn(2, 4, 8, 16).to("cuda").requires_grad_()
k = ember.randn(2, 4, 8, 16).to("cuda").requires_grad_()
v = ember.randn(2, 4, 8, 16).to("cuda").requires_grad_()
outs = []
outs.append(F.layer_norm(x, (32,), w, b))
outs.append(F.layer_norm(x, (32,)))
outs.append(F.dropout(x, 0.1, training=True))
outs.append(F.scaled_dot_product_attention(q, k, v, is_causal=True))
with ember.autocast("cuda", dtype=ember.bfloat16):
    outs.append(F.scaled_dot_product_attention(q, k, v, is_causal=True))
    outs.append(F.layer_norm(x, (32,), w, b))

outs.append(x.max(dim=-1)[0])
outs.append(ember.var_mean(x, dim=-1)[1])
outs.append(ember.sort(x, dim=-1)[0])
seen = {}
def sv(t):
    if isinstance(t, ember.Tensor):
        return ["T", list(t.shape), str(t.dtype), t.requires_grad]
    if type(t).__name__ == "SavedTensor":
        d = t.data
        return ["S", t.is_output, t.nr, t.requires_grad, list(d.shape), str(d.dtype), type(d.grad_fn).__name__,
                getattr(t, "origin", "?") is None]
    return repr(t)
def desc(fn):
    if fn is None:
        return None
    if id(fn) in seen:
        return seen[id(fn)]
    seen[id(fn)] = len(seen)
    d = {"name": type(fn).__name__, "nout": getattr(fn, "_num_outputs", None),
         "next": [(desc(f), nr) for f, nr in fn.next_functions], "saved": {}}
    for a in dir(fn):
        if a.startswith("_saved_"):
            try:
                val = getattr(fn, a)
            except Exception as e:
                val = type(e).__name__
            if isinstance(val, ember.Tensor):
                val = ["T", list(val.shape), str(val.dtype), val.requires_grad, type(val.grad_fn).__name__]
            elif isinstance(val, (tuple, list)):
                val = [sv(t) for t in val]
            else:
                val = repr(val)
            d["saved"][a] = val
    return d
res = []
for o in outs:
    m = o._autograd_meta
    res.append({"grad_fn": desc(o.grad_fn), "rg": o.requires_grad, "nr": None if m is None else m.output_nr})
ember.autograd.set_detect_anomaly(False)  # (the fake host's values are garbage: no NaN check)
# backward through everything runs
loss = sum(o.float().sum() for o in outs)
loss.backward()
res.append([list(t.grad.shape) for t in (x, w, b, q, k, v)])
print(json.dumps({"graph": res, "python_calls": python_calls}, sort_keys=True))
"""


@_NATIVE
def test_several_output_calls_are_recorded_natively_as_in_python(tmp_path):
    """layer_norm, flash SDPA (plain and under autocast), max.dim, var_mean and sort on the fake CUDA host: the
    fast path records their several outputs natively (no _recording.record_computed call), with the graph
    autograd's Python recording gives them (anomaly mode takes it): node classes, next_functions and
    output numbers, _num_outputs, saved arguments and outputs (is_output, nr, requires_grad, data), each
    output's requires_grad and output_nr, and a backward through all of them."""
    native, python = _fake_host_runs(tmp_path, _MULTI_OUTPUT_PROGRAM,
                                     [{"EMBER_TEST_RECORDING": way} for way in ("native", "python")])
    assert native["python_calls"] == [] and python["python_calls"] == []
    assert native["graph"] == python["graph"]
    names = {g["grad_fn"]["name"] for g in native["graph"][:-1]}
    assert {"NativeLayerNormBackward0", "ScaledDotProductFlashAttentionBackward0", "MaxBackward0",
            "VarMeanBackward0", "SortBackward0"} <= names, names


# -- cuBLAS through _C._device_call ------------------------------------------------------------------------

_BLAS_CALLS = r"""
import ctypes, json, os, sys
sys.path.insert(0, sys.argv[1])
import host_cuda_fake
host_cuda_fake.install()
import ember
import ember.nn.functional as F
from ember import _C
from ember._cuda import _blas

vp, i32, i64, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_size_t
SIGS = {
    "cublasSetStream_v2": [vp, vp],
    "cublasGemmEx": [vp, i32, i32, i32, i32, i32, vp, vp, i32, i32, vp, i32, i32, vp, vp, i32, i32, i32, i32],
    "cublasGemmStridedBatchedEx": [vp, i32, i32, i32, i32, i32, vp, vp, i32, i32, i64, vp, i32, i32, i64, vp, vp,
                                   i32, i32, i64, i32, i32, i32],
    "cublasLtMatmulDescSetAttribute": [vp, i32, vp, sz],
    "cublasLtMatmul": [vp] * 14 + [sz, vp],
}
BY_COUNT = {len(s): name for name, s in SIGS.items()}
# the parameters passed by pointer to host values (read through them: the addresses differ by process)
SCALARS = {"cublasGemmEx": (6, 13, 17), "cublasGemmStridedBatchedEx": (6, 15, 20), "cublasLtMatmul": (2, 7, None)}
rec = _C._device_call_recorder(0)
log = []

def record(n):
    name = BY_COUNT[n]
    vals = list(_C._device_call_recorded(n)[1:])
    for i, t in enumerate(SIGS[name]):
        if t is i32:
            vals[i] &= 0xFFFFFFFF
    if name in SCALARS:
        a, b, compute = SCALARS[name]
        ty = ctypes.c_double if compute is not None and vals[compute] == 70 else ctypes.c_float
        vals[a], vals[b] = ty.from_address(vals[a]).value, ty.from_address(vals[b]).value
    if name == "cublasLtMatmul":
        vals[12] = ctypes.string_at(vals[12], 64).hex()  # the algorithm's bytes
    if name == "cublasLtMatmulDescSetAttribute":
        vals[2] = ctypes.c_uint64.from_address(vals[2]).value  # the bias address
    log.append([name] + vals)

native = os.environ.get("EMBER_CUDA_NATIVE_BLAS") != "0"
for lib in (_blas._STATE["lib"], _blas._STATE["lt"]):
    for name, sig in SIGS.items():
        if hasattr(lib, name):
            # a ctypes function over the recorder that logs what it received when ctypes calls it (descriptor
            # set-up, and every call of the ctypes path); _C._device_call takes its address
            class Entry(ctypes._CFuncPtr):
                _flags_, _argtypes_, _restype_ = ctypes._FUNCFLAG_CDECL, tuple(sig), ctypes.c_int

                def __call__(self, *args, n=len(sig)):
                    rc = super().__call__(*args)
                    record(n)
                    return rc
            setattr(lib, name, Entry(rec))
if native:
    call = _blas._CALL

    def logged(fn, *args):
        rc = call(fn, *args)
        record(len(args))
        return rc

    _blas._CALL = logged

ember.manual_seed(0)
bf = ember.bfloat16
a, b = ember.randn(8, 16).to("cuda"), ember.randn(16, 4).to("cuda")
outs = [a.to(bf) @ b.to(bf), a.double() @ b.double(), a @ b,
        ember.addmm(ember.randn(8, 4).to("cuda"), a, b, beta=0.5, alpha=2.0),
        ember.bmm(ember.randn(3, 8, 16).to("cuda"), ember.randn(3, 16, 4).to("cuda")), a.t().t() @ b.t().t()]
lin = ember.nn.Linear(16, 32).to("cuda")
with ember.autocast("cuda", dtype=bf):
    y = lin(a.requires_grad_())
y.float().sum().backward()
s = ember.cuda.Stream(_handle=0x5150)  # a stream handle of its own (the fake host has no driver)
with ember.cuda.stream(s):
    outs.append(a.detach() @ b)
print(json.dumps({"native": _blas._CALL is not None, "log": log}))
"""


@pytest.mark.skipif(not hasattr(_C, "_device_call"), reason="the core was built without _C._device_call")
def test_cublas_calls_through_device_call_pass_what_ctypes_passes(tmp_path):
    """cuBLAS's per-call entry points (GEMM, batched GEMM, set-stream, cuBLASLt's bias attribute and matmul)
    called through _C._device_call and through ctypes, on the fake host with a recording C stand-in: the same
    calls in the same order, every argument equal (32-bit ones compared in their low half, the scalars and
    the algorithm read through their pointers)."""
    nat, py = _fake_host_runs(tmp_path, _BLAS_CALLS, [{"EMBER_CUDA_NATIVE_BLAS": "1"}, {"EMBER_CUDA_NATIVE_BLAS": "0"}])
    assert nat["native"] and not py["native"]
    names = [c[0] for c in nat["log"]]
    for name in ("cublasSetStream_v2", "cublasGemmEx", "cublasGemmStridedBatchedEx", "cublasLtMatmulDescSetAttribute",
                 "cublasLtMatmul"):
        assert name in names
    assert nat["log"] == py["log"]
    scalars = {(c[7], c[14]) for c in nat["log"] if c[0] == "cublasGemmEx"}
    assert (2.0, 0.5) in scalars and (1.0, 0.0) in scalars
    assert any(c[18] == 70 for c in nat["log"] if c[0] == "cublasGemmEx")  # float64: double scalars


def test_device_call_passes_integer_arguments_and_refuses_others():
    if not hasattr(_C, "_device_call"):
        pytest.skip("the core was built without _C._device_call")
    rec = _C._device_call_recorder(3)
    args = [1, -1, 2**64 - 1, None, 2**40 + 5, -(2**63)] + list(range(18))
    assert _C._device_call(rec, *args) == 3
    got = _C._device_call_recorded(24)
    assert got[0] == 1
    assert list(got[1:]) == [a % 2**64 if a is not None else 0 for a in args]
    libc = ctypes.CDLL(None)
    assert _C._device_call(ctypes.cast(libc.abs, ctypes.c_void_p).value, -5) == 5
    with pytest.raises(TypeError):
        _C._device_call(rec, 1.5)
    with pytest.raises(TypeError):
        _C._device_call(rec, *range(25))
    with pytest.raises(OverflowError):
        _C._device_call(rec, 2**64)
    with pytest.raises(ValueError):
        _C._device_call(0)


_CASTS = _RECORDED_HOST + r"""
import os
from ember._cuda import _ops_copy

if os.environ.get("CAST_PLAIN"):
    class _Never(dict):  # the inlined cast never finds its plan: every cast takes launch_linear
        def get(self, key, default=None):
            return None

        def __setitem__(self, key, value):
            pass

    _ops_copy._CASTS = _Never()
ember.manual_seed(0)
bf, f16, f32, f64 = ember.bfloat16, ember.float16, ember.float32, ember.float64
dtypes = []
for _ in range(2):  # the second time the plans are cached
    x = ember.randn(4, 16).to("cuda")
    big = ember.empty(3 << 20, device="cuda")  # past the large-block size
    odd = ember.randn(3, 5).to("cuda")[:, 1:]  # not contiguous: the general copy
    flat = ember.randn(37).to("cuda")[1:]  # contiguous, misaligned start
    outs = [x.to(bf), x.to(f64), x.to(bf).to(f16), big.to(bf), odd.to(bf), flat.to(f16), x.to(ember.int32),
            x.to(bf).to(ember.bool)]
    s = ember.cuda.Stream(_handle=0x5150)
    with ember.cuda.stream(s):
        outs.append(x.to(bf))
    dtypes = [str(o.dtype) for o in outs] + [list(o.shape) for o in outs]
log = [(f, g, b, s, st, fn, sl.hex()) for f, g, b, s, st, fn, sl in _C._device_launch_log()]
print(json.dumps({"dtypes": dtypes, "log": log, "cached": len(_ops_copy._CASTS)}))
"""


_BINARY = _RECORDED_HOST + r"""
ember.manual_seed(0)
x, y = ember.randn(4, 16).to("cuda"), ember.randn(4, 16).to("cuda")
h, i = ember.randn(4, 16).to(ember.bfloat16).to("cuda"), ember.arange(64).to("cuda")
z = ember.randn(33).to("cuda")[1:]  # contiguous, its start misaligned
w = ember.randn(32).to("cuda")
rounds = []
for _ in range(2):  # the first call per dtype pair runs the general path (and caches its plan), the second the fast one
    outs = [w + z, x + y, x * 2.0, h - h, i + 3, i * i, x[:, 1:] + y[:, 1:], z * 0.5]
    rounds.append([[list(o.shape), str(o.dtype), o.stride()] for o in outs])
    del outs  # (the second round's results reuse the first round's blocks: the same addresses)
s = ember.cuda.Stream(_handle=0x5150)
with ember.cuda.stream(s):
    side = [x + y, x * 2.0]
log = [(f, g, b, s, st, fn, sl.hex()) for f, g, b, s, st, fn, sl in _C._device_launch_log()]
print(json.dumps({"rounds": rounds, "log": log}))
"""


@_NATIVE
def test_binary_fast_path_launches_as_the_general_path(tmp_path):
    """Same-shape binary ops (tensor-tensor, tensor-number; float32, bfloat16, int64; a misaligned start, a strided
    pair that never takes the fast path) launch, once their plan is cached, what their first (general) call
    launched: every argument byte, grid and stream; on a side stream, with that stream."""
    (run,) = _fake_host_runs(tmp_path, _BINARY, [{}])
    assert run["rounds"][0] == run["rounds"][1]
    log = run["log"]
    kernels = [entry for entry in log if entry[4] == 0]
    half = len(kernels) // 2
    assert half == 8 and len(kernels) == 2 * half
    assert kernels[:half] == kernels[half:]
    side = [entry for entry in log if entry[4] == 0x5150]
    assert len(side) == 2 and [e[0] for e in side] == [e[0] for e in kernels[1:3]]

@_NATIVE
def test_inlined_casts_launch_as_launch_linear(tmp_path):
    """_to_copy's inlined contiguous cast (its plan cached per dtype pair) makes the launches (every argument
    byte, grid, stream) and results that launch_linear makes: aligned, misaligned and large casts, a side
    stream; strided sources still take the general copy."""
    fast, plain = _fake_host_runs(tmp_path, _CASTS, [{}, {"CAST_PLAIN": "1"}])
    assert fast["cached"] >= 4 and plain["cached"] == 0
    assert fast["dtypes"] == plain["dtypes"]
    assert len(fast["log"]) >= 18 and fast["log"] == plain["log"]


# -- version counters of fresh CUDA results ----------------------------------------------------------

_VERSIONS = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2:] != ["cpu"]:
    import host_cuda_fake
    host_cuda_fake.install()
    import ember as lib
    dev = "cuda"
else:
    import torch as lib
    dev = "cpu"
F = lib.nn.functional
p = lib.full((4,), 0.5, device=dev)
got = [lib.eye(3, device=dev)._version, lib.ones(3, device=dev)._version, lib.full((3,), 2.0, device=dev)._version,
       lib.zeros(3, device=dev)._version, lib.randint(0, 5, (3,), device=dev)._version,
       lib.randint_like(p, 5)._version, lib.bernoulli(p)._version, lib.rand(3, device=dev)._version,
       lib.normal(p, p)._version, F.pad(p, (1, 1), value=3.0)._version, lib.empty(0, 2, device=dev).sum(0)._version,
       lib.bincount(lib.tensor([1, 2, 2], device=dev))._version,
       lib.bincount(lib.tensor([1], device=dev), p[:1])._version,
       lib.bincount(lib.tensor([], dtype=lib.int64, device=dev), minlength=2)._version, lib.histc(p, 4)._version,
       lib.histc(p.half(), 4, 0, 1)._version, lib.diag(p)._version, lib.diag_embed(p)._version,
       lib.linspace(0, 1, 5, device=dev)._version, lib.logspace(0, 1, 3, device=dev)._version,
       lib.cat([p, p[:0], p], 0)._version, lib.stack([p, p], 1)._version,
       lib.cat([lib.ones(2, 3, device=dev), lib.ones(2, 2, dtype=lib.float16, device=dev)], 1)._version]
for name, args in [("bernoulli_", (p,)), ("bernoulli_", (0.5,)), ("exponential_", ()), ("geometric_", (0.5,)),
                   ("log_normal_", ()), ("cauchy_", ()), ("random_", (0, 5)), ("fill_", (1.0,))]:
    w = lib.empty(4, device=dev)
    getattr(w, name)(*args)
    got.append(w._version)
print(json.dumps(got))
"""


def test_fresh_cuda_results_start_at_version_zero_as_torch(tmp_path):
    """Factories and samplers on the fake CUDA host: a fresh result at _version 0 (full's fill, eye's
    diagonal, the samplers' stores into a factory's result, bincount's and histc's zero_ and index_add_,
    diag's diagonal copy, cat's copies into its slices are below the counter), each in-place sampler
    one write, as torch's (its CPU build: the counts do not depend on the device)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    (cuda,) = _fake_host_runs(tmp_path, _VERSIONS, [{}])
    script = tmp_path / "prog.py"
    benchmarks = Path(__file__).resolve().parents[3] / "benchmarks"
    ref = subprocess.run([sys.executable, str(script), str(benchmarks), "cpu"], capture_output=True, text=True,
                         timeout=600)
    assert ref.returncode == 0, ref.stderr[-3000:]
    assert cuda == json.loads(ref.stdout.strip().splitlines()[-1])


# -- objects the garbage collector sees per recorded CUDA op ------------------------------------------------

_UNTRACKED = r"""
import gc, json, sys
sys.path.insert(0, sys.argv[1])
import host_cuda_fake
host_cuda_fake.install()
import ember
w = ember.randn(8, 4).to("cuda").requires_grad_()
x = ember.randn(2, 3, 4).to("cuda").requires_grad_()
with ember.autocast("cuda", dtype=ember.bfloat16):
    y = ember.nn.functional.linear(x, w)  # autocast's casts of x and w, then views and addmm
casts = [y.grad_fn]
while casts and type(casts[-1]).__name__ != "ToCopyBackward0":
    casts.append(casts[-1].next_functions[0][0])
cast = casts[-1]
view = x.view(6, 4).grad_fn
stand_in = tuple.__getitem__(cast._saved_args, 0)
kw = cast._kwargs
out = {"cast": type(cast).__name__, "kwargs": sorted(kw), "kwargs_tracked": gc.is_tracked(kw),
       "stand_in": [stand_in.device.type, str(stand_in._src_device), vars(stand_in), gc.is_tracked(stand_in)],
       "view_args_tracked": gc.is_tracked(view._saved_args),
       "view_stand_in_tracked": gc.is_tracked(tuple.__getitem__(view._saved_args, 0))}
kw["extra"] = [1]  # a tracked value: CPython's dict rule tracks the dict again
out["kwargs_tracked_after_insert"] = gc.is_tracked(kw)
del kw["extra"]
y.float().sum().backward()
out["grads"] = [str(x.grad.dtype), list(x.grad.shape), str(x.grad.device), str(w.grad.dtype), list(w.grad.shape)]
print(json.dumps(out))
"""


def test_recorded_cuda_casts_and_views_leave_the_collector_alone(tmp_path):
    """On CUDA (the fake host: the native device fast path records these): an autocast cast's node keeps its
    {dtype, device} kwargs in an untracked dict (tracked again when a tracked value is put in it), its input's
    stand-in keeps the source device in a field (no __dict__) and is untracked, as is a view's tuple of args;
    backward still gives the leaves float32 gradients of their shapes on their device."""
    (run,) = _fake_host_runs(tmp_path, _UNTRACKED, [{}])
    assert run["cast"] == "ToCopyBackward0" and run["kwargs"] == ["device", "dtype"]
    assert run["kwargs_tracked"] is False and run["kwargs_tracked_after_insert"] is True
    assert run["stand_in"] == ["meta", "cuda:0", {}, False]
    assert run["view_args_tracked"] is False and run["view_stand_in_tracked"] is False
    assert run["grads"] == ["ember.float32", [2, 3, 4], "cuda:0", "ember.float32", [8, 4]]


_COLUMNS = _RECORDED_HOST + r"""
import os
from ember._cuda import _reduce

if os.environ.get("COL_PLAIN"):
    class _Never(dict):  # no plan is ever found: every column reduction makes its plan afresh
        def get(self, key, default=None):
            return None

        def __setitem__(self, key, value):
            pass

    _reduce._COL_PLANS = _Never()
ember.manual_seed(0)
bf = ember.bfloat16
shapes = []
for round_ in range(2):  # the second round finds the first round's plans
    g = ember.randn(512, 768).to("cuda")
    outs = [g.sum(0), g.to(bf).sum(0), g.mean(0), ember.nansum(g, 0), g[:40, :300].sum(0),
            ember.randn(3, 64, 10).to("cuda").sum(1), g.sum(0, keepdim=True)]
    s = ember.cuda.Stream(_handle=0x5150)
    with ember.cuda.stream(s):
        outs.append(g.sum(0))
    x = ember.randn(16, 768).to("cuda").requires_grad_()
    w, b = ember.ones(768, device="cuda", requires_grad=True), ember.zeros(768, device="cuda", requires_grad=True)
    ember.nn.functional.layer_norm(x, (768,), w, b).sum().backward()  # its weight and bias gradients' sums
    outs += [w.grad, b.grad]
    if round_ == 1:
        plans = len(_reduce._COL_PLANS)
        _reduce.COL_CONFIG.update(bk=64, ppsm=2)  # a sweep's change: the plans made before must not be used
        emptied = len(_reduce._COL_PLANS) == 0
        outs.append(g.sum(0))
        _reduce.COL_CONFIG.update(bk=128, ppsm=8)
    shapes.append([[list(o.shape), str(o.dtype)] for o in outs])
log = [(f, g, b, s, st, fn, sl.hex()) for f, g, b, s, st, fn, sl in _C._device_launch_log()]
print(json.dumps({"shapes": shapes, "log": log, "plans": plans, "emptied": emptied}))
"""


@_NATIVE
def test_column_reduction_plans_launch_as_the_search(tmp_path):
    """Column reductions (bias/LayerNorm gradient sums: split into partials or not, scaled for mean, nansum's
    partials summed, a side stream) launch from their cached plan what the block/split search launches (every
    argument byte, grid, stream); a change of COL_CONFIG empties the plans, so a sweep's setting is used."""
    planned, plain = _fake_host_runs(tmp_path, _COLUMNS, [{}, {"COL_PLAIN": "1"}])
    assert planned["plans"] >= 5 and plain["plans"] == 0 and planned["emptied"]
    assert planned["shapes"] == plain["shapes"]
    assert len(planned["log"]) >= 30 and planned["log"] == plain["log"]
    grids = {tuple(entry[1]) for entry in planned["log"]}
    assert len(grids) >= 4  # (the geometries differ: split and unsplit passes, the changed block width)
