"""AOT compilation benchmark: ember's aoti_compile_and_package beside torch's, in one process.

Run from the repository root:
    PYTHONPATH=$(python ci/dev_env.py):packages/export/tests python benchmarks/bench_export_aoti.py [--no-torch-aoti]

Per model (packages/export/tests/export_models.py, eval mode, dynamic batch; the mini-GPT's
sequence is dynamic too), one thread:

- compile time of the package from an exported program (cold: ember's kernel cache is not used
  by AOT packages, every build runs the C compiler; torch's AOTInductor compiles its own C++);
- package size (.pt2 bytes);
- forward latency (median of 50 after warm-up) of the loaded package vs eager, for both, and
  the ratio ember AOT / torch AOT. "ember AOT" is the C runtime (``ember_aoti_run`` through
  ctypes); "ember plan" is the Python plan interpreter the C path replaced (kept as the
  fallback), built from the same program for comparison.

Figures (2026-12-02, ``--no-torch-aoti``, shared loaded 2-core host, +-30%):

| model | ember compile | ember .pt2 | ember eager | ember AOT (C) | ember plan | torch eager | AOT / torch eager |
| --- | --- | --- | --- | --- | --- | --- | --- |
| mlp | 4.0 s | 48.4 KiB | 0.162 ms | 0.068 ms | 0.160 ms | 0.081 ms | 0.85 |
| cnn | 3.4 s | 47.0 KiB | 0.876 ms | 0.193 ms | 0.822 ms | 0.698 ms | 0.28 |
| mini_gpt | 7.2 s | 240.3 KiB | 8.504 ms | 0.867 ms | 1.454 ms | 1.096 ms | 0.79 |

torch's AOTInductor on the MLP (dynamic batch, same session): 82 s to compile, 0.056 ms per
call, so ember AOT / torch AOT = 1.2 for the MLP (it was 4.0 with the plan interpreter).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, "packages/export/tests")
from export_models import cnn, copy_weights, mini_gpt, mlp  # noqa: E402

sys.path.insert(0, "benchmarks")
from _timing import median_time  # noqa: E402

import ember  # noqa: E402
from ember._inductor import aoti_compile_and_package, aoti_load_package  # noqa: E402

MODELS = [
    ("mlp", mlp, lambda lib: lib.randn(4, 6)),
    ("cnn", cnn, lambda lib: lib.randn(4, 1, 8, 8)),
    ("mini_gpt", mini_gpt, lambda lib: lib.randint(0, 50, (2, 8))),
]


DYNAMIC = {"mlp": {0: "batch"}, "cnn": {0: "batch"}, "mini_gpt": {0: "batch", 1: "seq"}}


def _plan_run(ep, x, tmp, name):
    """Latency of the Python plan interpreter (the fallback runtime) on the same program."""
    from ember.export import _aoti
    from ember.export._aoti_c import CUnsupported

    def refuse(*args, **kwargs):
        raise CUnsupported("benchmark: the plan interpreter")

    saved, _aoti._compile_c = _aoti._compile_c, refuse
    try:
        path = aoti_compile_and_package(ep, package_path=os.path.join(tmp, f"ember_plan_{name}.pt2"))
    finally:
        _aoti._compile_c = saved
    compiled = aoti_load_package(path)
    return median_time(lambda: compiled(x), 50)


def _ember(name, make, make_x, tmp):
    model = make(ember).eval()
    x = make_x(ember)
    dims = {d: ember.export.Dim(n, max=16 if n == "seq" else 1024) for d, n in DYNAMIC[name].items()}
    ep = ember.export.export(model, (x,), dynamic_shapes=(dims,))
    start = time.perf_counter()
    path = aoti_compile_and_package(ep, package_path=os.path.join(tmp, f"ember_{name}.pt2"))
    seconds = time.perf_counter() - start
    compiled = aoti_load_package(path)
    assert compiled.get_metadata()["runtime"] == "c", compiled.get_metadata()
    with ember.no_grad():
        eager = median_time(lambda: model(x), 50)
    run = median_time(lambda: compiled(x), 50)
    return model, x, seconds, os.path.getsize(path), eager, run, _plan_run(ep, x, tmp, name)


def _torch(name, make, model_e, x_e, tmp, with_aoti: bool):
    model = make(torch).eval()
    copy_weights(model_e, model)
    x = torch.from_numpy(x_e.numpy().copy())
    with torch.no_grad():
        eager = median_time(lambda: model(x), 50)
    if not with_aoti:
        return None, None, eager, None
    try:
        ep = torch.export.export(model, (x,))
        start = time.perf_counter()
        path = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(tmp, f"torch_{name}.pt2"))
        seconds = time.perf_counter() - start
        compiled = torch._inductor.aoti_load_package(path)
        with torch.no_grad():
            run = median_time(lambda: compiled(x), 50)
        return seconds, os.path.getsize(path), eager, run
    except Exception as exc:  # a missing toolchain piece: report, keep the ember figures
        print(f"  torch AOTInductor failed on {name}: {type(exc).__name__}: {str(exc)[:200]}")
        return None, None, eager, None


def main() -> None:
    with_aoti = "--no-torch-aoti" not in sys.argv
    ember.set_num_threads(1)
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, make_x in MODELS:
            model_e, x, e_compile, e_size, e_eager, e_run, e_plan = _ember(name, make, make_x, tmp)
            t_compile, t_size, t_eager, t_run = _torch(name, make, model_e, x, tmp, with_aoti)
            rows.append((name, e_compile, t_compile, e_size, t_size, e_eager, e_run, e_plan, t_eager, t_run))

    def ms(v):
        return f"{v * 1e3:.3f} ms" if v is not None else "-"

    def kib(v):
        return f"{v / 1024:.1f} KiB" if v is not None else "-"

    print("| model | ember compile | torch compile | ember .pt2 | torch .pt2 | ember eager | ember AOT | "
          "ember plan | torch eager | torch AOT | ember AOT / torch AOT | ember AOT / torch eager |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, ec, tc, es, ts, ee, er, ep_, te, tr in rows:
        ratio = f"{er / tr:.2f}" if tr else "-"
        tcs = f"{tc:.1f} s" if tc is not None else "-"
        print(f"| {name} | {ec:.1f} s | {tcs} | {kib(es)} | {kib(ts)} | {ms(ee)} | {ms(er)} | {ms(ep_)} | {ms(te)} | "
              f"{ms(tr)} | {ratio} | {er / te:.2f} |")


if __name__ == "__main__":
    main()
