"""What ember-cuda promises on a machine without a GPU (CI): the plugin is found, costs nothing
to import, reports no device, and every CUDA call raises the errors of PyTorch's CPU build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ember

pytestmark = pytest.mark.skipif(ember.cuda.is_available(), reason="checks the no-GPU behaviour")


def test_plugin_is_registered_and_reports_no_device():
    from ember._src import plugins

    plugin = plugins.load("cuda")
    assert plugin is not None and plugin.api.__name__ == "ember._cuda.api"
    assert ember.cuda.is_available() is False
    assert ember.cuda.device_count() == 0
    assert ember.cuda.memory_allocated() == 0 and ember.cuda.max_memory_allocated() == 0
    assert ember.cuda.memory_reserved() == 0
    assert ember.cuda.memory_stats() == {}
    assert "No CUDA device" in ember.cuda.memory_summary()
    ember.cuda.empty_cache()
    ember.cuda.manual_seed(0)
    ember.cuda.manual_seed_all(0)


@pytest.mark.parametrize("call", [
    lambda: ember.zeros(2, device="cuda"), lambda: ember.ones(2).cuda(), lambda: ember.ones(2).to("cuda:0"),
    lambda: ember.cuda.current_device(), lambda: ember.cuda.synchronize(), lambda: ember.cuda.get_device_name(),
    lambda: ember.cuda.get_device_properties(0), lambda: ember.cuda.set_device(0),
])
def test_cuda_calls_raise_pytorch_cpu_build_errors(call):
    with pytest.raises(AssertionError):
        call()


def test_pin_memory_needs_an_accelerator():
    with pytest.raises(RuntimeError, match="accelerator"):
        ember.ones(3).pin_memory()
    assert ember.ones(3).is_pinned() is False


def test_importing_ember_does_not_import_the_plugin_or_the_driver():
    code = ("import sys, ember; ember.ones(2) + 1; "
            "print(any(m.startswith(('ember._cuda', 'cuda.bindings', 'triton')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_allocator_size_classes():
    from ember._cuda._allocator import _Config, round_size

    assert round_size(1) == 512 and round_size(512) == 512 and round_size(513) == 1024
    assert round_size(1 << 20) == 1 << 20
    big = round_size((1 << 24) + 1)  # just above a power of two: the next quarter step
    assert big == (1 << 24) + (1 << 22)
    for n in (3 << 20, 5 << 20, 100_000_000):
        assert n <= round_size(n) <= n * 1.25
    assert _Config("roundup_power2_divisions:8").divisions == 8
    with pytest.raises(RuntimeError, match="Unrecognized"):
        _Config("no_such_key:1")
    with pytest.raises(RuntimeError, match="power of 2"):
        _Config("roundup_power2_divisions:3")


def test_elementwise_dim_collapsing():
    from ember._cuda._elementwise import collapse

    # contiguous 3-d: one dim
    assert collapse((2, 3, 4), [(12, 4, 1), (12, 4, 1)]) == ((24,), [(1,), (1,)])
    # a transposed operand keeps two dims
    shape, strides = collapse((3, 4), [(4, 1), (1, 3)])
    assert shape == (3, 4) and strides == [(4, 1), (1, 3)]
    # broadcast over the leading dim
    shape, strides = collapse((5, 2, 3), [(6, 3, 1), (0, 3, 1)])
    assert shape == (5, 6) and strides == [(6, 1), (0, 1)]
    # size-1 dims vanish
    assert collapse((1, 7, 1), [(7, 1, 1)]) == ((7,), [(1,)])


def test_expression_tables_refuse_unsupported_dtypes():
    from ember._cuda import _exprs

    with pytest.raises(NotImplementedError, match="div_cuda.*Long"):
        _exprs.lookup(_exprs.BINARY, "div", ember.int64)
    assert "libdevice.exp" in _exprs.lookup(_exprs.UNARY, "exp", ember.float32)


def test_cuda_out_of_memory_error_is_the_core_class():
    # torch.cuda.OutOfMemoryError is torch.OutOfMemoryError (one class, caught by either name).
    from ember._cuda import _driver

    assert ember.cuda.OutOfMemoryError is ember.OutOfMemoryError is _driver.OutOfMemoryError
    assert issubclass(ember.OutOfMemoryError, RuntimeError)


def test_kernel_cache_files_are_written_whole(tmp_path, monkeypatch):
    # The cubin and its metadata JSON go through a temporary file and os.replace (another process
    # reading the shared cache sees a whole file or none); nothing temporary is left behind.
    import json

    from ember._cuda import _compile

    pytest.importorskip("triton")  # its version is part of the cache key
    monkeypatch.setenv("EMBER_CUDA_CACHE", str(tmp_path))
    meta = {"name": "k", "shared": 0, "num_warps": 4, "global_scratch_size": 0, "profile_scratch_size": 0}
    replaced = []
    real_replace = _compile.os.replace
    monkeypatch.setattr(_compile, "compile_cubin", lambda *args: (b"\x7fELF-cubin", dict(meta)))
    monkeypatch.setattr(_compile.os, "replace", lambda src, dst: (replaced.append(Path(dst).suffix),
                                                                   real_replace(src, dst)))
    key = ("src", "k", (), (), (), 4, 1, 0)
    assert _compile.cubin_for(key, "src", "k", {}, {}, (), 4, 1, 90) == (b"\x7fELF-cubin", meta)
    files = sorted(p.name for p in (tmp_path / "bin").iterdir())
    assert [Path(f).suffix for f in files] == [".cubin", ".json"], files
    assert replaced == [".cubin", ".json"]
    assert json.loads((tmp_path / "bin" / files[1]).read_text()) == meta
    # A second call reads the pair back without compiling.
    monkeypatch.setattr(_compile, "compile_cubin", None)
    assert _compile.cubin_for(key, "src", "k", {}, {}, (), 4, 1, 90) == (b"\x7fELF-cubin", meta)


def test_kernels_with_global_scratch_get_a_buffer_per_launch(monkeypatch):
    """A kernel that needs Triton's global scratch (tensor descriptors made on the device) is launched with one more
    pointer argument, a block of (programs x per-program bytes) taken for that launch; profile scratch is refused."""
    from types import SimpleNamespace

    from ember._cuda import _compile, _storage

    meta = {"name": "k", "shared": 0, "num_warps": 4, "global_scratch_size": 640, "profile_scratch_size": 0}
    monkeypatch.setattr(_compile, "cubin_for", lambda *args: (b"cubin", dict(meta)))
    monkeypatch.setattr(_compile, "_arch", lambda device: 90)
    loaded, calls, sizes = [], [], []
    monkeypatch.setattr(_compile, "load", lambda cubin, m, kinds, device: (
        loaded.append(kinds), lambda grid, stream, *args: calls.append((grid, stream, args)))[1])
    monkeypatch.setattr(_storage, "allocate", lambda nbytes, dev=None: (
        sizes.append((nbytes, dev.index)), SimpleNamespace(data_ptr=lambda: 4096))[1])
    launcher = _compile._build(None, "src", "k", {"X": "*fp32", "n": "i32", "B": "constexpr"}, {"B": 4}, (), 4, 1, 0)
    assert loaded == [["ptr", "i32", "ptr"]]
    launcher((6, 2, 1), 7, 1234, 5)
    assert sizes == [(6 * 2 * 640, 0)] and calls == [((6, 2, 1), 7, (1234, 5, 4096))]
    meta["profile_scratch_size"] = 8
    with pytest.raises(RuntimeError, match="profile scratch"):
        _compile._build(None, "src", "k", {"X": "*fp32"}, {}, (), 4, 1, 0)
