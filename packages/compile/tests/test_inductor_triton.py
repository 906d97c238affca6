"""The inductor's Triton backend without a GPU: generated kernels run in Triton's interpreter on
CPU tensors and are compiled for sm_90, each program compared with eager ember and PyTorch.

Triton's interpreter must be chosen before Triton is first imported (``TRITON_INTERPRET=1``),
and compiling for a GPU needs it off: each mode runs ``inductor_triton_cases.py`` in a process
of its own, once per module, and every case is one test here. Skipped where Triton is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
pytest.importorskip("triton.language.extra.libdevice")

from inductor_triton_cases import CASES, SPECIAL  # noqa: E402

import ember  # noqa: E402
from ember.compiler.inductor import _triton_runtime, config  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "inductor_triton_cases.py")
# compiled for sm_90: one program of each kernel kind and dtype family (each compile takes ~1 s)
SM90 = ["pointwise_chain", "pointwise_views_in_graph", "pointwise_float64", "pointwise_bfloat16", "pointwise_math",
        "pointwise_int32_bool", "reduction_looped_rows", "reduction_outer_columns", "reduction_outer_row_scaled",
        "reduction_split_full", "reduction_split_columns", "reduction_split_many_columns", "cat_pieces_into_slices",
        "reduction_int_bool_prod",
        "softmax_persistent",
        "layer_norm_persistent", "welford_looped_rows", "softmax_looped_specials", "cross_entropy",
        "cross_entropy_backward", "cross_entropy_backward_saved_lse", "number_arguments_graph"]


def _run(args, interpret: bool, tmp, **extra) -> dict:
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp), PYTHONPATH=os.pathsep.join(sys.path), **extra)
    env["TRITON_INTERPRET"] = "1" if interpret else "0"
    env.pop("EMBER_LOGS", None)
    proc = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, timeout=600)
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            results[entry["case"]] = entry
    if not results:
        raise AssertionError(f"the case runner printed nothing (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
    return results


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    return _run([], True, tmp_path_factory.mktemp("triton_interp"))


@pytest.fixture(scope="module")
def sm90(tmp_path_factory):
    return _run(["--sm90", *SM90], False, tmp_path_factory.mktemp("triton_sm90"))


@pytest.mark.parametrize("name", [*CASES, *(n for n in SPECIAL if n != "graph_cache")])
def test_interpreted_matches_eager_and_torch(interpreted, name):
    entry = interpreted.get(name)
    assert entry is not None, f"{name} did not run"
    assert entry["ok"], entry.get("error")


@pytest.mark.parametrize("name", SM90)
def test_compiles_for_sm90_without_a_gpu(sm90, name):
    entry = sm90.get(name)
    assert entry is not None, f"{name} did not run"
    assert entry["ok"], entry.get("error")


def test_a_second_process_takes_the_graph_from_the_cache(tmp_path):
    first = _run(["graph_cache"], True, tmp_path)["graph_cache"]
    assert first["ok"], first.get("error")
    second = _run(["graph_cache"], True, tmp_path, EMBER_EXPECT_HIT="1")["graph_cache"]
    assert second["ok"], second.get("error")


def test_tuned_configurations_are_kept_on_disk(tmp_path, monkeypatch):
    from ember.compiler.inductor import _triton_cache

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))

    class Spec:
        source, name = "# kernel\n", "kernel0"

    device = ember.device("cpu")
    assert _triton_cache.load_tuning(Spec, device) == {}
    _triton_cache.store_tuning(Spec, device, {(1024, 8192): (1, 8192, 8), (16, 1): (16, 1, 1)})
    assert _triton_cache.load_tuning(Spec, device) == {(1024, 8192): (1, 8192, 8), (16, 1): (16, 1, 1)}
    Spec.source = "# another kernel\n"  # the source is part of the key
    assert _triton_cache.load_tuning(Spec, device) == {}
    folder = tmp_path / "compile" / "triton" / "tune"
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_cpu_graphs_keep_the_cpp_backend():
    from ember.compiler import make_fx
    from ember.compiler.inductor import compile_fx

    x = ember.randn(8, 8)
    gm = make_fx(lambda x: x.sin() + 1)(x)
    compiled = compile_fx(gm, [x])
    assert compiled.artifact is not None
    assert getattr(compiled.artifact, "triton_kernels", None) is None
    assert "@triton.jit" not in compiled.artifact.cpp_source


def test_cpu_backend_triton_needs_the_interpreter():
    # in this process Triton (if imported) is not in interpreter mode: CPU graphs stay on C++
    saved = config.cpu_backend
    config.cpu_backend = "triton"
    try:
        assert _triton_runtime.backend_for(ember.device("cpu")) in (None, "interpreter")
    finally:
        config.cpu_backend = saved


def test_block_size_candidates():
    class Spec:
        reduction, persistent = False, False

    pointwise = _triton_runtime.configs(Spec, 1 << 22, 1, False)
    assert (1024, 1, 4) in pointwise and len(pointwise) >= 2
    assert len(_triton_runtime.configs(Spec, 1 << 22, 1, True)) > len(pointwise)
    assert all(c[0] <= 16 for c in _triton_runtime.configs(Spec, 10, 1, False))  # no block past the data
    Spec.reduction = Spec.persistent = True
    for _xb, rb, warps in _triton_runtime.configs(Spec, 16384, 8192, False):
        assert rb >= 8192 and 1 <= warps <= 16  # a persistent row fits one block
    xb, rb, warps = _triton_runtime.configs(Spec, 2048, 256, False)[0]  # the untuned pick: rows share a block
    assert rb == 256 and xb * rb == 2048 and warps == 8
    assert any(c[0] > 1 for c in _triton_runtime.configs(Spec, 16384, 8192, False))  # 2 rows a block tried
    Spec.persistent = False
    looped = _triton_runtime.configs(Spec, 64, 100000, False)
    assert all(rb < 100000 for _, rb, _ in looped)
    Spec.outer = True
    # an outer reduction over few columns (GPT-2's 768 LayerNorm weight gradients over 8192 rows)
    # starts with blocks narrow enough to give a big GPU's SMs one each
    xb, rb, _ = _triton_runtime.configs(Spec, 768, 8192, False)[0]
    assert 768 // xb >= 64 and xb >= 8
    assert (64, 64, 4) in _triton_runtime.configs(Spec, 768, 8192, False)
    assert _triton_runtime.configs(Spec, 65536, 8192, False)[0] == (64, 64, 4)  # many columns: wide blocks


def test_source_cache_is_keyed_by_source(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    a = _triton_runtime.source_path("# one\n")
    b = _triton_runtime.source_path("# one\n")
    c = _triton_runtime.source_path("# two\n")
    assert a == b != c
    assert open(a).read() == "# one\n"
    assert not [f for f in os.listdir(os.path.dirname(a)) if f.endswith(".tmp")]


def test_layer_norm_weight_gradient_is_an_outer_reduction():
    # The per-row mean/rstd vectors run along the reduced dim but are shared by every column:
    # they must not make a column sum over 8192 rows a one-column-a-block persistent kernel
    # (GPT-2's LayerNorm weight gradients ran at ~1/10 of the bandwidth that way).
    from ember.compiler import make_fx
    from ember.compiler.inductor._compile_fx import triton_kernels

    def program(g, x, mean, rstd):
        return (g * ((x - mean[:, None]) * rstd[:, None])).sum(0), g.sum(0)

    inputs = [ember.randn(8192, 64), ember.randn(8192, 64), ember.randn(8192), ember.rand(8192)]
    gm = make_fx(program)(*inputs)
    _, _, specs = triton_kernels(gm, inputs)
    reductions = [s for s in specs if s.reduction]
    assert reductions
    for spec in reductions:
        assert spec.outer and not spec.persistent, spec.source


def test_full_reduction_is_split_into_rows(monkeypatch):
    # one program would reduce all 2**20 elements on a GPU: a first kernel reduces 1024 rows
    from ember.compiler import make_fx
    from ember.compiler.inductor._compile_fx import triton_kernels

    monkeypatch.setattr(config, "cpu_backend", "triton")  # CPU tensors stand in for the GPU's
    x = ember.randn(1024, 1024)
    gm = make_fx(lambda x: (x * 2).sum())(x)
    _, _, specs = triton_kernels(gm, [x])
    sizes = sorted((int(s.xnumel), int(s.rnumel)) for s in specs if s.reduction)
    assert sizes == [(1, 1024), (1024, 1024)], sizes


def test_few_column_reduction_is_split_into_parts(monkeypatch):
    # GPT-2's LayerNorm weight gradient: 768 sums over 8192 rows, 32 parts of 256 rows each
    from ember.compiler import make_fx
    from ember.compiler.inductor._compile_fx import triton_kernels

    monkeypatch.setattr(config, "cpu_backend", "triton")
    g, x = ember.randn(8192, 768), ember.randn(8192, 768)
    gm = make_fx(lambda g, x: (g * x).sum(0))(g, x)
    _, _, specs = triton_kernels(gm, [g, x])
    sizes = sorted((int(s.xnumel), int(s.rnumel)) for s in specs if s.reduction)
    assert sizes == [(768, 32), (32 * 768, 256)], sizes


def test_many_column_reduction_is_split_into_parts(monkeypatch):
    # GPT-2's qkv bias gradient: 2304 sums over 8192 rows ran as 144 programs each walking all
    # the rows (~1/6 of the bandwidth); 32 parts of 256 rows (blocks of whole rows of columns),
    # then 32 partial sums a column
    from ember.compiler import make_fx
    from ember.compiler.inductor._compile_fx import triton_kernels

    monkeypatch.setattr(config, "cpu_backend", "triton")
    g = ember.randn(8192, 2304).bfloat16()
    gm = make_fx(lambda g: g.sum(0))(g)
    _, _, specs = triton_kernels(gm, [g])
    sizes = sorted((int(s.xnumel), int(s.rnumel)) for s in specs if s.reduction)
    assert sizes == [(2304, 32), (32 * 2304, 256)], sizes
    assert all(s.outer for s in specs)
    xb, rb, _ = _triton_runtime.configs(specs[0], 32 * 2304, 256, False)[0]
    assert xb >= 32 and rb == 256  # a row of the block is a whole line of columns
    xb, _, _ = _triton_runtime.configs(specs[1], 2304, 32, False)[0]
    assert 2304 // xb >= 128  # the second pass still gives every SM a block
    # reduced over trailing dims (a row sum of many rows): no split
    gm = make_fx(lambda g: g.sum(1))(g.t())
    assert len([s for s in triton_kernels(gm, [g.t()])[2] if s.reduction]) == 1
