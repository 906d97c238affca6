"""The AOT library's C interface: a C program with no Python runs a package, dynamic sizes included.

The test writes inputs to a file, builds ``aoti_c/aoti_main.c`` with the system compiler against
the package's ``ember_aoti.h`` and ``model.so``, runs it, and compares its outputs with eager ember.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import ember
from ember._inductor import aoti_compile_and_package, aoti_load_package
from ember.export import Dim, export

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("gcc") is None,
                                reason="needs Linux and gcc")

_CODES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int64): 2, np.dtype(np.int32): 3}
_NUMPY = {v: k for k, v in _CODES.items()}


def _write(path, arrays) -> None:
    with open(path, "wb") as f:
        f.write(np.int64(len(arrays)).tobytes())
        for a in arrays:
            a = np.ascontiguousarray(a)
            f.write(np.array([_CODES[a.dtype], a.ndim, *a.shape], np.int64).tobytes())
            f.write(a.tobytes())


def _read(path) -> list:
    data = open(path, "rb").read()
    pos, out = 8, []
    for _ in range(int(np.frombuffer(data[:8], np.int64)[0])):
        dtype, ndim = np.frombuffer(data[pos:pos + 16], np.int64)
        pos += 16
        shape = tuple(np.frombuffer(data[pos:pos + 8 * ndim], np.int64))
        pos += 8 * int(ndim)
        dt = _NUMPY[int(dtype)]
        count = int(np.prod(shape)) if shape else 1
        out.append(np.frombuffer(data[pos:pos + count * dt.itemsize], dt).reshape(shape))
        pos += count * dt.itemsize
    return out


def _package_dir(ep, tmp_path, name):
    path = aoti_compile_and_package(ep, package_path=str(tmp_path / f"{name}.pt2"))
    pkg = tmp_path / name
    with zipfile.ZipFile(path) as z:
        z.extractall(pkg)
    root = pkg / "ember_aoti"
    assert {"model.so", "weights.bin", "ember_aoti.h"} <= set(os.listdir(root))
    return path, root


def _build_main(root, tmp_path):
    src = os.path.join(os.path.dirname(__file__), "aoti_c", "aoti_main.c")
    exe = tmp_path / "aoti_main"
    subprocess.run(["gcc", "-std=c11", "-O1", "-I", str(root), src, "-o", str(exe), str(root / "model.so"),
                    f"-Wl,-rpath,{root}"], check=True, capture_output=True, text=True)
    return exe


def _run_c(exe, root, tmp_path, arrays) -> list:
    _write(tmp_path / "in.bin", arrays)
    env = {"PATH": os.environ.get("PATH", ""), "OMP_NUM_THREADS": "1"}  # no Python anywhere
    out = subprocess.run([str(exe), str(root), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return _read(tmp_path / "out.bin")


def test_c_program_runs_the_mlp_at_several_batch_sizes(tmp_path):
    import export_models as em

    ember.manual_seed(0)
    model = em.mlp(ember).eval()
    ep = export(model, (ember.randn(4, 6),), dynamic_shapes=({0: Dim("batch", max=64)},))
    path, root = _package_dir(ep, tmp_path, "mlp")
    assert aoti_load_package(path).get_metadata()["runtime"] == "c"
    exe = _build_main(root, tmp_path)
    for batch in (4, 1, 37):
        x = np.random.default_rng(batch).standard_normal((batch, 6)).astype(np.float32)
        (got,) = _run_c(exe, root, tmp_path, [x])
        with ember.no_grad():
            want = model(ember.tensor(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # Sizes outside the exported range are refused by the library itself.
    _write(tmp_path / "in.bin", [np.zeros((65, 6), np.float32)])
    out = subprocess.run([str(exe), str(root), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "above its range's maximum 64" in out.stderr


def test_c_program_runs_the_mini_gpt_with_dynamic_batch_and_sequence(tmp_path):
    import export_models as em

    ember.manual_seed(0)
    model = em.mini_gpt(ember).eval()
    ep = export(model, (ember.randint(0, 50, (2, 8)),),
                dynamic_shapes=({0: Dim("batch"), 1: Dim("seq", max=16)},))
    path, root = _package_dir(ep, tmp_path, "gpt")
    exe = _build_main(root, tmp_path)
    compiled = aoti_load_package(path)
    for shape in ((2, 8), (3, 5), (1, 16)):
        idx = np.random.default_rng(sum(shape)).integers(0, 50, shape).astype(np.int64)
        (got,) = _run_c(exe, root, tmp_path, [idx])
        with ember.no_grad():
            want = model(ember.tensor(idx)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(compiled(ember.tensor(idx)).numpy(), want, rtol=1e-4, atol=1e-5)


def test_cnn_with_batch_norm_runs_in_c_with_dynamic_batch(tmp_path):
    import export_models as em

    ember.manual_seed(0)
    model = em.cnn(ember)
    model(ember.randn(4, 1, 8, 8))  # running statistics that are not the initial ones
    model.eval()
    # Height and width are dynamic too: conv/pool output sizes are floor divisions in C.
    ep = export(model, (ember.randn(3, 1, 8, 8),), dynamic_shapes=({0: Dim("batch", max=32), 2: Dim.AUTO,
                                                                   3: Dim.AUTO},))
    path = aoti_compile_and_package(ep, package_path=str(tmp_path / "cnn.pt2"))
    compiled = aoti_load_package(path)
    assert compiled.get_metadata()["runtime"] == "c"
    for shape in ((3, 1, 8, 8), (1, 1, 9, 12), (9, 1, 16, 7)):
        x = ember.randn(*shape)
        with ember.no_grad():
            ember.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


def test_graphs_with_ops_without_a_c_version_fall_back_and_say_which(tmp_path):
    import export_models as em

    model = em.lstm(ember).eval()
    x = ember.randn(2, 5, 5)
    path = aoti_compile_and_package(export(model, (x,)), package_path=str(tmp_path / "lstm.pt2"))
    compiled = aoti_load_package(path)
    meta = compiled.get_metadata()
    assert meta["runtime"] == "python-plan" and "_lstm_layer" in meta["fallback_reason"]
    with ember.no_grad():
        ember.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
