"""The host side of ember's CUDA path, measured without a GPU: the driver, cuBLAS, cuFFT and the kernel
loader are replaced by no-op C functions (the ctypes calls keep their argument conversion), device
memory by fake addresses, and Triton kernels are compiled for sm_90 as on the GPU (or found in the
kernel cache, ``EMBER_CUDA_CACHE``). Everything ember runs in Python per op (dispatch, autograd,
autocast, the CUDA kernels' argument handling, allocator, launch packing) runs as on the device, so
host costs can be profiled on any machine; device results are garbage and never read.

    python benchmarks/host_cuda_fake.py add            # 1-element add: host us/call
    python benchmarks/host_cuda_fake.py gpt2 [--layers N] [--profile] [--mode M]  # host ms per training step
                                                   # (--mode: the model under ember.compile;
                                                   #  --gc: collections per step; --gc-freeze: gc.freeze() first)
    python benchmarks/host_cuda_fake.py gpt_compiled [--profile] [--mode M]  # compiled mini-GPT forward
    python benchmarks/host_cuda_fake.py adam [--layers N] [--profile]  # GPT-2's fused AdamW opt.step() alone
    python benchmarks/host_cuda_fake.py precompile_attention  # bench_cuda_attention --tune-bwd-forms' cubins
    python benchmarks/host_cuda_fake.py precompile_grid  # bench_cuda_attention --tune-grid's cubins
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

_LIBC = ctypes.CDLL(None)
# A C function that returns 0 and ignores its arguments: getuid for root (a trivial system call), else
# sched_yield (which may yield the processor on a busy machine: timings then overstate).
_NOOP = ctypes.cast(_LIBC.getuid if os.getuid() == 0 else _LIBC.sched_yield, ctypes.c_void_p).value


def _noop(argtypes):
    fn = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(_NOOP)
    return fn


def install() -> None:
    """Makes ember.cuda believe one sm_90 device is present; call before any CUDA tensor exists."""
    from ember._cuda import _allocator, _blas, _compile, _driver, _fastcall

    _driver._STATE["count"] = 1
    _driver._TLS.index, _driver._TLS.ctx = 0, 1
    _driver._PROPS[0] = SimpleNamespace(major=9, minor=0, multi_processor_count=132, name="fake sm_90",
                                        total_memory=141 << 30, L2_cache_size=60 << 20, warp_size=32)
    lib = SimpleNamespace(**{name: _noop(argtypes) for name, argtypes in _fastcall._SIGNATURES.items()})

    def dtoh(dst, src, nbytes, stream):  # device data read back as zeros: deterministic, not garbage
        ctypes.memset(dst, 0, nbytes)
        return 0

    lib.cuMemcpyDtoHAsync_v2 = ctypes.CFUNCTYPE(ctypes.c_int, *_fastcall._SIGNATURES["cuMemcpyDtoHAsync_v2"])(dtoh)
    _fastcall._LIB[:] = [lib]
    nxt = [1 << 40]

    def device_alloc(self, size, nbytes):
        nxt[0] += (size + 4095) & ~4095
        self.reserved += size
        return nxt[0]

    _allocator.DeviceAllocator._device_alloc = device_alloc
    _allocator.DeviceAllocator._device_free = lambda self, block: None
    vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    _blas._STATE["lib"] = SimpleNamespace(
        cublasCreate_v2=_noop([ctypes.POINTER(vp)]), cublasSetStream_v2=_noop([vp, vp]),
        cublasGemmEx=_noop([vp, i32, i32, i32, i32, i32, vp, vp, i32, i32, vp, i32, i32, vp, vp, i32, i32, i32, i32]),
        cublasGemmStridedBatchedEx=_noop([vp, i32, i32, i32, i32, i32, vp, vp, i32, i32, i64, vp, i32, i32, i64, vp,
                                          vp, i32, i32, i64, i32, i32, i32]))

    sz = ctypes.c_size_t

    def heuristic(handle, desc, a, b, c, d, pref, requested, results, found):
        found._obj.value = 1  # one algorithm (bytes of zeros), no workspace
        return 0

    _blas._STATE["lt"] = SimpleNamespace(
        cublasLtCreate=_noop([ctypes.POINTER(vp)]), cublasLtMatmulDescCreate=_noop([ctypes.POINTER(vp), i32, i32]),
        cublasLtMatmulDescSetAttribute=_noop([vp, i32, vp, sz]),
        cublasLtMatrixLayoutCreate=_noop([ctypes.POINTER(vp), i32, ctypes.c_uint64, ctypes.c_uint64, i64]),
        cublasLtMatmulPreferenceCreate=_noop([ctypes.POINTER(vp)]),
        cublasLtMatmulPreferenceSetAttribute=_noop([vp, i32, vp, sz]), cublasLtMatmulAlgoGetHeuristic=heuristic,
        cublasLtMatmul=_noop([vp] * 14 + [sz, vp]))

    from ember._cuda import (
        _ops_fft,  # cuFFT: plans and transforms as no-op calls (plan handle 0, no work area)
    )

    fft = {"cufftCreate": [ctypes.POINTER(i32)], "cufftSetAutoAllocation": [i32, i32],
           "cufftMakePlanMany64": [i32, i32, vp, vp, i64, i64, vp, i64, i64, i32, i64, vp],
           "cufftSetStream": [i32, vp], "cufftSetWorkArea": [i32, vp], "cufftDestroy": [i32]}
    fft.update({name: [i32, vp, vp, i32] if name in ("cufftExecC2C", "cufftExecZ2Z") else [i32, vp, vp]
                for name in _ops_fft._EXEC.values()})
    _ops_fft._STATE["lib"] = SimpleNamespace(**{name: _noop(argtypes) for name, argtypes in fft.items()})

    def load(cubin, meta, kinds, device):
        return _fastcall.make_launcher(1, kinds, meta["num_warps"], meta["shared"], meta["name"])

    _compile.load = load
    from ember._cuda import _ops_index

    flag = ctypes.c_int32(0)  # the device-side index-error flag: a host int no kernel writes here
    _ops_index._FLAG[0] = (flag, ctypes.addressof(flag))


def bench_add(n=20000) -> float:
    import ember

    one = ember.ones(1, device="cuda")
    for _ in range(500):
        one + one
    best = float("inf")
    for _ in range(5):
        t0 = time.thread_time()  # CPU time of this thread (see bench_gpt2)
        for _ in range(n // 5):
            one + one
        best = min(best, (time.thread_time() - t0) / (n // 5) * 1e6)
    return best


def bench_gpt2(layers: int, steps: int, profile: bool, mode=None, gc_report=False, gc_freeze=False) -> float:
    """Median host CPU ms per step. ``gc_report``: also prints the garbage collector's collections per step
    and their CPU ms per step, by generation. ``gc_freeze``: ``gc.freeze()`` after the model is built and
    warm (a user's choice, measured here: ember never freezes; a full collection then skips every object
    alive at that point, the modules' functions and the model among them)."""
    import gc

    import ember

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cuda_gpt2 import build

    ember.manual_seed(0)
    model = build(ember, layers).to("cuda")
    opt = ember.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    if mode is not None:  # bench_cuda_gpt2's compiled step: the model under ember.compile
        model = ember.compile(model, mode=None if mode == "default" else mode)
    idx = ember.randint(0, 50257, (8, 1025)).to("cuda")
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()

    def step():
        with ember.autocast("cuda", dtype=ember.bfloat16):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    if gc_freeze:
        gc.freeze()
    spent = {0: [], 1: [], 2: []}
    start = [0.0]

    def on_gc(phase, info):
        if phase == "start":
            start[0] = time.thread_time()
        else:
            spent[info["generation"]].append(time.thread_time() - start[0])

    if gc_report:
        gc.callbacks.append(on_gc)
    times = []
    for _ in range(steps):
        t0 = time.thread_time()  # CPU time of this thread: steady on a shared machine, unlike wall time
        step()
        times.append(time.thread_time() - t0)
    if gc_report:
        gc.callbacks.remove(on_gc)
        for gen, ts in spent.items():
            print(f"GC generation {gen}: {len(ts) / steps:.3f} collections/step, {sum(ts) / steps * 1e3:.3f} ms/step"
                  f" ({sum(ts) / max(len(ts), 1) * 1e3:.3f} ms each)")
        print(f"GC-tracked objects in the process: {len(gc.get_objects())} (frozen: {gc.get_freeze_count()})")
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        step()
        prof.disable()
        stats = pstats.Stats(prof)
        stats.sort_stats("tottime").print_stats(40)
        stats.sort_stats("cumulative").print_stats(60)
    return statistics.median(times) * 1e3


def bench_adam(layers: int, steps: int, profile: bool) -> tuple:
    """Host CPU ms of ``opt.step()`` (AdamW, fused=True) over GPT-2's parameters, grads set once: (min, median)."""
    import ember

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cuda_gpt2 import build

    ember.manual_seed(0)
    params = list(build(ember, layers).to("cuda").parameters())
    opt = ember.optim.AdamW(params, lr=3e-4, weight_decay=0.1, fused=True)
    for p in params:
        p.grad = ember.empty_like(p)
    for _ in range(3):
        opt.step()
    times = []
    for _ in range(max(steps, 50)):
        t0 = time.thread_time()
        opt.step()
        times.append(time.thread_time() - t0)
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        opt.step()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(20)
    return min(times) * 1e3, statistics.median(times) * 1e3


def bench_gpt_compiled(steps: int, profile: bool, mode) -> float:
    """Host CPU us per call of ``ember.compile``'s mini-GPT forward (bench_compile_triton's program)."""
    import numpy as np

    import ember

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_compile_triton import gpt_source

    ns: dict = {}
    exec(gpt_source(), ns)
    ember.manual_seed(0)
    model = ns["make_gpt"](ember.nn, ember).eval().to("cuda")
    idx = ember.tensor(np.random.default_rng(0).integers(0, 512, (16, 128))).to("cuda")
    with ember.no_grad():
        compiled = ember.compile(model, mode=mode)
        for _ in range(3):
            compiled(idx)
        times = []
        for _ in range(steps):
            t0 = time.thread_time()
            for _ in range(20):
                compiled(idx)
            times.append((time.thread_time() - t0) / 20)
        if profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            prof.enable()
            for _ in range(20):
                compiled(idx)
            prof.disable()
            stats = pstats.Stats(prof)
            stats.sort_stats("tottime").print_stats(30)
            stats.sort_stats("cumulative").print_stats(40)
    return statistics.median(times) * 1e6


def precompile_attention() -> int:
    """Compiles (into ``EMBER_CUDA_CACHE``) the flash-attention kernels that ``bench_cuda_attention.py
    --tune-bwd-forms`` and its rows launch, so that a GPU call with the same Triton and the cache carried
    compiles none of them. Returns how many launches were made."""
    import math

    import ember
    import ember.nn.functional as EF
    from ember._cuda import _ops_attention as A

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cuda_attention import apply_bwd_form, bwd_form_state, bwd_form_variants

    saved = bwd_form_state(A)
    b, h, d, n = 8, 12, 64, 0
    for t in (1024, 4096):
        for causal in (True, False):
            # (B, T, H, D) storage viewed as (B, H, T, D), as the benchmark's inputs and gradients are
            q, k, v, g = (ember.empty(b, t, h, d, dtype=ember.bfloat16, device="cuda").transpose(1, 2)
                          for _ in range(4))
            with ember.no_grad():
                out, lse = A.flash_forward(q, k, v, None, causal, 1 / math.sqrt(d))
            for var in bwd_form_variants():
                apply_bwd_form(A, var, saved)
                A.flash_backward(g, q, k, v, out, lse, None, causal, 1 / math.sqrt(d))
                n += 1
            A._BWD_MODE, A._ATOMIC_FORM, A._ATOMIC_D64, A._LPT, A._bwd_config, A._DIAG_LAST = saved
            x = [z.detach().requires_grad_() for z in (q, k, v)]
            ember.autograd.grad(EF.scaled_dot_product_attention(*x, is_causal=causal), x, ember.ones_like(x[0]))
            n += 1
    return n


def precompile_grid(shard: tuple[int, int] = (0, 1)) -> int:
    """Compiles (into ``EMBER_CUDA_CACHE``) the kernels of ``bench_cuda_attention.py --tune-grid`` (every forward,
    dK/dV and dQ variant of its sweep at T1024 and T4096, causal and not), as precompile_attention does for
    --tune-bwd-forms. ``shard`` (i, n) takes every n-th variant from the i-th, so n processes compile the grid
    side by side (a GPU machine's cores). Returns how many launches were made."""
    import math

    import ember
    from ember._cuda import _ops_attention as A

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_cuda_attention import apply_grid, grid_state, grid_variants, set_grid_state

    saved = grid_state(A)
    b, h, d, n = 8, 12, 64, 0
    seen = iter(range(1 << 30))

    def mine():  # this shard's variant?
        return next(seen) % shard[1] == shard[0]
    for t in (1024, 4096):
        for causal in (True, False):
            q, k, v, g = (ember.empty(b, t, h, d, dtype=ember.bfloat16, device="cuda").transpose(1, 2)
                          for _ in range(4))
            with ember.no_grad():
                out, lse = A.flash_forward(q, k, v, None, causal, 1 / math.sqrt(d))
            for var in grid_variants():
                if var[1] != causal or not mine():
                    continue
                apply_grid(A, var, short=t <= 2048)
                if var[0] in ("fwd", "fwd_tma"):
                    with ember.no_grad():
                        A.flash_forward(q, k, v, None, causal, 1 / math.sqrt(d))
                else:
                    A.flash_backward(g, q, k, v, out, lse, None, causal, 1 / math.sqrt(d))
                set_grid_state(A, saved)
                n += 1
            if not causal:  # the "bias" variants: an additive (1, 1, T, T) mask
                mask = ember.empty(1, 1, t, t, dtype=ember.bfloat16, device="cuda")
                with ember.no_grad():
                    out, lse = A.flash_forward(q, k, v, mask, False, 1 / math.sqrt(d))
                for var in grid_variants():  # the dK/dV "bias" tiles, and dQ's (the winner's runs beside them)
                    if (var[0] == "bias" or (var[0] in ("dq", "dq_tma") and not var[1])) and mine():
                        apply_grid(A, var)
                        A.flash_backward(g, q, k, v, out, lse, mask, False, 1 / math.sqrt(d))
                        set_grid_state(A, saved)
                        n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("add", "gpt2", "gpt_compiled", "adam", "precompile_attention", "precompile_grid"))
    ap.add_argument("--mode", default=None)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--shard", default="0/1", help="precompile_grid: i/n, every n-th variant from the i-th")
    ap.add_argument("--gc", action="store_true", help="gpt2: the collector's collections and ms per step")
    ap.add_argument("--gc-freeze", action="store_true", help="gpt2: gc.freeze() once the model is built and warm")
    args = ap.parse_args()
    install()
    if args.what == "add":
        print(f"1-element add: {bench_add():.2f} host CPU us/call (best of 5; no GPU: launches are no-ops)")
    elif args.what == "adam":
        best, med = bench_adam(args.layers, args.steps, args.profile)
        print(f"GPT-2 ({args.layers} layers) AdamW(fused=True) opt.step(): {best:.3f} min / {med:.3f} median "
              "host CPU ms")
    elif args.what == "precompile_attention":
        print(f"flash attention: {precompile_attention()} launches compiled into the kernel cache")
    elif args.what == "precompile_grid":
        shard = tuple(map(int, args.shard.split("/")))
        print(f"flash attention grid: {precompile_grid(shard)} launches compiled into the kernel cache")
    elif args.what == "gpt_compiled":
        us = bench_gpt_compiled(args.steps, args.profile, args.mode)
        print(f"mini-GPT forward, ember.compile(mode={args.mode!r}): {us:.0f} host CPU us/call (median)")
    else:
        ms = bench_gpt2(args.layers, args.steps, args.profile, args.mode, args.gc, args.gc_freeze)
        how = f", ember.compile(mode={args.mode!r})" if args.mode else ""
        print(f"GPT-2 ({args.layers} layers, B8 T1024{how}) training step: {ms:.1f} host CPU ms "
              "(median; no GPU: launches are no-ops)")


if __name__ == "__main__":
    main()
