"""Flash attention and CUDA graphs: ember beside PyTorch CUDA, in one process on one GPU.

- ``scaled_dot_product_attention`` forward and forward+backward (B8, H12, D64, bf16, causal and
  not, T 1024 and 4096): CUDA-event medians of the kernels, each call queued behind device work
  so that the host's time to issue it is not counted (``_timing.cuda_median_ms(hide_host=True)``;
  a T1024 causal forward runs ~70 us, about what ember's host needs to reach its launch); TFLOP/s
  counts 4*B*H*T*T*D for the forward and 2.5 times that for the backward (halved when causal), the
  usual flash-attention convention. ``*_lat_ms``: the same call timed from an idle device, the
  host's latency to the first launch included (the figure of the earlier sessions).
- A small MLP training step (forward, loss, backward) eager and replayed as CUDA graphs
  (``make_graphed_callables``), host wall time per step: what graphs save is host work.
- ``--tune``: ember's flash kernels under several tile configurations and launch modes (how the
  defaults in ``_ops_attention`` were chosen), before the rows, which then run what the sweeps chose
  (``--tune-fwd``/``--tune-bwd``: one of the two sweeps; ``--tune-only``/``--tune-fwd-only``: no rows).
  The forward+backward rows take the gradients with ``autograd.grad`` on both sides.

    python benchmarks/bench_cuda_attention.py [--quick] [--tune | --tune-fwd | --tune-bwd | --tune-only |
                                               --tune-fwd-only] [--tune-bwd-forms] [--no-graphs] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

from _timing import cuda_median_ms as _median_ms

import ember
import ember.nn.functional as EF


def _qkv(torch, fw, b, h, t, d, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    ts = [torch.randn(b, t, h, d, device="cuda", generator=g, dtype=torch.bfloat16).transpose(1, 2)
          for _ in range(3)]  # the (B, T, H, D) -> (B, H, T, D) view of a GPT block
    if fw is torch:
        return [x.requires_grad_() for x in ts]
    return [ember.from_dlpack(x.detach()).requires_grad_() for x in ts]


def _attention_rows(torch, iters, sizes):
    rows = []
    for t in sizes:
        # causal, plain, and a BERT-style key-padding mask: bool (B, 1, 1, T), the last eighth of the keys masked
        for causal in (True, False, "mask"):
            b, h, d = 8, 12, 64
            fwd_flops = 4 * b * h * t * t * d / (2 if causal is True else 1)
            for what, flops in (("fwd", fwd_flops), ("fwd+bwd", 3.5 * fwd_flops)):
                how = {True: " causal", False: "", "mask": " padding mask"}[causal]
                row = {"name": f"sdpa bf16 B{b} H{h} T{t} D{d}{how} {what}"}
                for label, fw in (("ember", ember), ("torch", torch)):
                    q, k, v = _qkv(torch, fw, b, h, t, d)
                    F = EF if fw is ember else torch.nn.functional
                    grad = fw.ones_like(q)
                    mask = None
                    if causal == "mask":
                        mask = fw.ones(b, 1, 1, t, dtype=fw.bool, device="cuda")
                        mask[..., t - t // 8:] = False
                    if what == "fwd":
                        def fn(F=F, q=q, k=k, v=v, fw=fw, causal=causal is True, mask=mask):
                            with fw.no_grad():
                                F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
                    else:
                        def fn(F=F, q=q, k=k, v=v, grad=grad, causal=causal is True, fw=fw, mask=mask):
                            # autograd.grad: the gradients are returned, not accumulated into .grad (three
                            # additions that are not attention's)
                            fw.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal),
                                             (q, k, v), grad)
                    ms = _median_ms(fw, fn, iters, hide_host=True)
                    row[label + "_ms"] = round(ms, 4)
                    row[label] = round(flops / (ms * 1e-3) / 1e12, 1)
                    row[label + "_lat_ms"] = round(_median_ms(fw, fn, iters), 4)
                row["ratio"] = round(row["ember"] / row["torch"], 3)
                row["unit"] = "TFLOP/s"
                rows.append(row)
    return rows


FWD_CONFIGS = ((128, 64, 4, 3), (64, 64, 4, 3), (64, 64, 4, 4), (128, 64, 4, 4), (64, 32, 4, 3), (128, 128, 8, 3))


def _tune(torch, iters, backward=True):
    """The forward under each (BLOCK_M, BLOCK_N, warps, stages) of FWD_CONFIGS, with the scale folded into the
    exponent or not, at T1024 and T4096, causal or not; each result checked against the default's. The best
    configuration per length class (_FWD_SHORT: T <= 2048, _FWD_LONG) and fold choice are left set."""
    from ember._cuda import _ops_attention as A

    rows = []
    b, h, d = 8, 12, 64
    saved = A._fwd_config, A._FWD_SHORT, A._FWD_LONG, A._FOLD_SCALE
    times = {}
    for tt, causal in ((1024, True), (1024, False), (4096, True), (4096, False)):
        q, k, v = _qkv(torch, ember, b, h, tt, d)
        A._fwd_config, A._FOLD_SCALE = saved[0], saved[3]
        with ember.no_grad():
            ref = EF.scaled_dot_product_attention(q, k, v, is_causal=causal).float()
        for fold in (True, False):
            for cfg in FWD_CONFIGS:
                if causal and cfg[0] % cfg[1]:
                    continue  # the causal forward needs BLOCK_M a multiple of BLOCK_N (_ops_attention._fwd_config)
                A._fwd_config = lambda dtype, d, lq=0, causal=False, cfg=cfg: cfg
                A._FOLD_SCALE = fold
                with ember.no_grad():
                    ms = _median_ms(ember, lambda q=q, k=k, v=v, c=causal: EF.scaled_dot_product_attention(
                        q, k, v, is_causal=c), iters, hide_host=True)
                    # each configuration's result against the default one's (bf16 outputs: ~1e-2 at most)
                    err = float((EF.scaled_dot_product_attention(q, k, v, is_causal=causal).float() - ref).abs().max())
                if err < 3e-2:
                    times[(tt, causal, fold, cfg)] = ms
                rows.append({"name": f"tune flash fwd {'causal ' if causal else ''}T{tt} {cfg} fold={fold}",
                             "ember": round(ms, 4), "torch": f"err {err:.1e}", "ratio": "", "unit": "ms"})
                print(rows[-1]["name"], rows[-1]["ember"], "ms", rows[-1]["torch"], flush=True)

    def score(tt, fold, cfg):  # summed over causal and not, each relative to its best
        total = 0.0
        for causal in (True, False):
            best = min(v for key, v in times.items() if key[0] == tt and key[1] == causal)
            total += times.get((tt, causal, fold, cfg), float("inf")) / best
        return total

    def best_cfg(tt, fold):
        return min((score(tt, fold, cfg), cfg) for cfg in FWD_CONFIGS)

    fold = min((best_cfg(1024, f)[0] + best_cfg(4096, f)[0], f) for f in (True, False))[1]
    A._fwd_config, A._FOLD_SCALE = saved[0], fold
    A._FWD_SHORT, A._FWD_LONG = ((best_cfg(1024, fold)[1],) * 2), ((best_cfg(4096, fold)[1],) * 2)
    print(f"tune fwd: CHOSEN fold={fold} short {A._FWD_SHORT} long {A._FWD_LONG}", flush=True)
    rows.append({"name": f"tune fwd chosen: fold={fold} short {A._FWD_SHORT} long {A._FWD_LONG}", "ember": "",
                 "torch": "", "ratio": "", "unit": ""})
    if backward:
        rows += _tune_bwd(torch, iters)
    return rows


# Backward sweep: (BLOCK_M, BLOCK_N, warps, stages) of dK/dV and of dQ, then the launch modes.
DKDV_CONFIGS = ((64, 64, 4, 3), (32, 128, 4, 3), (64, 128, 8, 3), (32, 64, 4, 3), (64, 128, 4, 3),
                (32, 128, 8, 3), (64, 64, 4, 2), (128, 128, 8, 2), (32, 128, 4, 4), (64, 128, 8, 2))
DQ_CONFIGS = ((64, 64, 4, 3), (128, 64, 8, 3), (128, 32, 4, 3), (64, 32, 4, 3), (128, 64, 4, 3), (128, 128, 8, 2),
              (64, 64, 4, 4), (128, 32, 8, 3))
FUSED_CONFIGS = (((64, 64, 4, 3), (64, 64, 4, 3)), ((32, 128, 4, 3), (128, 32, 4, 3)),
                 ((64, 128, 8, 3), (128, 64, 8, 3)), ((32, 64, 4, 3), (64, 32, 4, 3)),
                 ((64, 128, 8, 2), (128, 64, 8, 2)))
DELTA_CONFIGS = ((64, 4), (128, 4), (128, 8), (256, 8), (32, 2))


def _tune_bwd(torch, iters):
    """The backward kernels alone (``flash_backward`` on a saved forward), causal T1024 and T4096, under each
    configuration: a staged search (dK/dV tiles with dQ fixed, then dQ tiles, then the launch modes), each
    configuration's gradients checked against PyTorch's. The winners are left set for the rows that follow."""
    import math

    from ember._cuda import _ops_attention as A

    b, h, d = 8, 12, 64
    cases = []
    for tt in (1024, 4096):
        tq, tk, tv = _qkv(torch, torch, b, h, tt, d, seed=tt)
        gt = torch.randn_like(tq)
        torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True).backward(gt)
        ref = [x.grad.float() for x in (tq, tk, tv)]
        q, k, v = (ember.from_dlpack(x.detach()) for x in (tq, tk, tv))
        g = ember.from_dlpack(gt)
        with ember.no_grad():
            out, lse = A.flash_forward(q, k, v, None, True, 1 / math.sqrt(d))
        cases.append((tt, q, k, v, g, out, lse, ref))
    saved = A._bwd_config, A._BWD_MODE, A._DELTA_CONFIG
    rows = []

    def measure(label):
        total, errs = 0.0, []
        times = []
        for tt, q, k, v, g, out, lse, ref in cases:
            fn = (lambda q=q, k=k, v=v, g=g, out=out, lse=lse:
                  A.flash_backward(g, q, k, v, out, lse, None, True, 1 / math.sqrt(d)))
            try:
                ms = _median_ms(ember, fn, iters, hide_host=True)
            except Exception as exc:  # a configuration Triton cannot build (shared memory, registers)
                print(f"tune bwd {label}: failed ({type(exc).__name__}: {str(exc)[:120]})", flush=True)
                return float("inf")
            got = fn()
            err = max(float((torch.from_dlpack(x).float() - r).norm() / r.norm()) for x, r in zip(got, ref))
            errs.append(err)
            times.append(ms)
            total += ms / best.setdefault(tt, ms)
            if err > 2e-2:
                total = float("inf")
        row = {"name": f"tune bwd {label}", "ember": " / ".join(f"{t:.4f}" for t in times),
               "torch": f"err {max(errs):.1e}", "ratio": "", "unit": "ms (causal T1024 / T4096)"}
        rows.append(row)
        print(row["name"], row["ember"], row["torch"], flush=True)
        return total

    best: dict = {}
    # Torch's backward alone, for scale (its fwd+bwd minus its fwd).
    F = torch.nn.functional
    for case in cases:
        tt = case[0]
        tq, tk, tv = (torch.from_dlpack(x).requires_grad_() for x in case[1:4])
        gt = torch.from_dlpack(case[4])

        def both_fn(tq=tq, tk=tk, tv=tv, gt=gt):
            F.scaled_dot_product_attention(tq, tk, tv, is_causal=True).backward(gt)

        def fwd_fn(tq=tq, tk=tk, tv=tv):
            with torch.no_grad():
                F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)

        both = _median_ms(torch, both_fn, iters, hide_host=True)
        fwd = _median_ms(torch, fwd_fn, iters, hide_host=True)
        print(f"torch causal T{tt}: fwd+bwd {both:.4f} ms, fwd {fwd:.4f} ms, bwd ~{both - fwd:.4f} ms", flush=True)
        rows.append({"name": f"torch SDPA causal T{tt} bwd (fwd+bwd - fwd)", "ember": "", "torch": round(both - fwd, 4),
                     "ratio": "", "unit": "ms"})

    def pick(options, apply, label):
        scores = []
        for opt in options:
            apply(opt)
            scores.append((measure(f"{label} {opt}"), opt))
        score, opt = min(scores, key=lambda x: x[0])
        apply(opt)
        print(f"tune bwd: best {label} {opt}", flush=True)
        return opt

    dq0 = saved[0](ember.bfloat16, d)[1]
    A._BWD_MODE = "dq_first"
    dkdv = pick(DKDV_CONFIGS, lambda c: setattr(A, "_bwd_config", lambda dtype, w, *_, c=c: (c, dq0)), "dq_first dkdv")
    dq = pick(DQ_CONFIGS, lambda c: setattr(A, "_bwd_config", lambda dtype, w, *_, c=c: (dkdv, c)), "dq_first dq")
    chosen = ("dq_first", (dkdv, dq), saved[2])
    A._bwd_config = lambda dtype, w, causal=True: (dkdv, dq)
    A._BWD_MODE = "split"
    delta = pick(DELTA_CONFIGS, lambda c: setattr(A, "_DELTA_CONFIG", c), "split delta")
    A._BWD_MODE = "fused"
    fused = pick(FUSED_CONFIGS, lambda c: setattr(A, "_bwd_config", lambda dtype, w, causal=True, c=c: c), "fused")
    # The three modes at their best, measured again side by side.
    finals = []
    for mode, cfg in (("dq_first", (dkdv, dq)), ("split", (dkdv, dq)), ("fused", fused)):
        A._BWD_MODE, A._bwd_config, A._DELTA_CONFIG = mode, (lambda dtype, w, causal=True, c=cfg: c), delta
        finals.append((measure(f"final {mode} {cfg} delta {delta}"), (mode, cfg, delta)))
    chosen = min(finals, key=lambda x: x[0])[1]
    A._BWD_MODE, A._bwd_config, A._DELTA_CONFIG = chosen[0], (lambda dtype, w, causal=True, c=chosen[1]: c), chosen[2]
    print(f"tune bwd: CHOSEN mode {chosen[0]} configs {chosen[1]} delta {chosen[2]}", flush=True)
    rows.append({"name": f"tune bwd chosen: {chosen}", "ember": "", "torch": "", "ratio": "", "unit": ""})
    return rows


# The backward's launch forms side by side (--tune-bwd-forms): (mode, atomic form, dK/dV configuration, LPT of the
# dK/dV grid, DIAG_LAST); for dq_first the configuration is the dK/dV kernel's (dQ keeps its default), for atomic
# (_ops_attention._ATOMIC_FORM 1 or 2) the one kernel's.
DQ_FIRST_DKDV = ((64, 64, 4, 3), (64, 64, 4, 4), (64, 64, 4, 2), (64, 128, 8, 3), (64, 128, 8, 2))
ATOMIC_VARIANTS = ((2, (64, 64, 4, 3), True, False), (2, (64, 64, 4, 3), True, True), (1, (64, 64, 4, 3), True, True),
                   (2, (64, 64, 4, 4), True, True), (2, (64, 128, 8, 3), True, True))


def bwd_form_variants():
    """The --tune-bwd-forms variants, the session-14 default (dq_first, (64, 64, 4, 3), diagonal first) first (also
    what host_cuda_fake.py's precompile_attention compiles)."""
    out = []
    for cfg in DQ_FIRST_DKDV:
        for diag_last in (False, True):
            out.append(("dq_first", 0, cfg, False, diag_last))
    for form, cfg, lpt, diag_last in ATOMIC_VARIANTS:
        out.append(("atomic", form, cfg, lpt, diag_last))
    return out


def apply_bwd_form(A, var, saved):
    """Sets ``_ops_attention`` (``A``) to the variant ``var`` of bwd_form_variants(); ``saved`` is bwd_form_state(A)."""
    mode, form, cfg, lpt, diag_last = var
    A._BWD_MODE, A._DIAG_LAST = mode, diag_last
    A._ATOMIC_FORM = form or saved[1]
    A._ATOMIC_D64 = cfg if mode == "atomic" else saved[2]
    A._LPT = (saved[3][0], saved[3][1], lpt)
    dq_cfg = saved[4](ember.bfloat16, 64)[1]
    A._bwd_config = saved[4] if mode == "atomic" else (lambda dtype, w, causal=True, c=cfg, d=dq_cfg: (c, d))


def bwd_form_state(A):
    return A._BWD_MODE, A._ATOMIC_FORM, A._ATOMIC_D64, A._LPT, A._bwd_config, A._DIAG_LAST


def _tune_bwd_forms(torch, iters, budget_s=200.0):
    """The backward alone (``flash_backward`` on a saved forward) under each of ``bwd_form_variants()``: the
    two-kernel ``dq_first`` form (dK/dV tiles, the causal diagonal first or last) and the atomic form (delta +
    zeroed float32 dQ, one dK/dV kernel adding dS K into it, a cast), against torch's backward (its fwd+bwd minus its
    fwd), at T1024 and T4096, causal and not; two alternating passes, the better median of each; gradients checked
    against torch's. The variant with the least summed time relative to each case's best is left set."""
    import math

    from ember._cuda import _ops_attention as A

    t_start = time.time()
    b, h, d = 8, 12, 64
    F = torch.nn.functional
    cases = []
    for tt in (1024, 4096):
        for causal in (True, False):
            tq, tk, tv = _qkv(torch, torch, b, h, tt, d, seed=tt + causal)
            gt = torch.randn_like(tq)
            F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal).backward(gt)
            ref = [x.grad.float() for x in (tq, tk, tv)]
            q, k, v = (ember.from_dlpack(x.detach()) for x in (tq, tk, tv))
            g = ember.from_dlpack(gt)
            with ember.no_grad():
                out, lse = A.flash_forward(q, k, v, None, causal, 1 / math.sqrt(d))

            def both_fn(tq=tq, tk=tk, tv=tv, gt=gt, c=causal):
                torch.autograd.grad(F.scaled_dot_product_attention(tq, tk, tv, is_causal=c), (tq, tk, tv), gt)

            def fwd_fn(tq=tq, tk=tk, tv=tv, c=causal):
                with torch.no_grad():
                    F.scaled_dot_product_attention(tq, tk, tv, is_causal=c)

            torch_bwd = _median_ms(torch, both_fn, iters, hide_host=True) - _median_ms(torch, fwd_fn, iters,
                                                                                      hide_host=True)
            cases.append(((tt, causal), q, k, v, g, out, lse, ref, torch_bwd))
            print(f"torch T{tt}{' causal' if causal else ''}: bwd ~{torch_bwd:.4f} ms", flush=True)
    saved = bwd_form_state(A)
    times: dict = {}
    errs: dict = {}
    variants = bwd_form_variants()

    for pass_ in range(2):
        for var in variants if pass_ == 0 else variants[::-1]:
            if time.time() - t_start > budget_s:
                print(f"tune bwd forms: time budget ({budget_s} s) spent in pass {pass_}", flush=True)
                break
            apply_bwd_form(A, var, saved)
            for key, q, k, v, g, out, lse, ref, _ in cases:  # (LPT and DIAG_LAST change causal grids only)
                fn = (lambda q=q, k=k, v=v, g=g, out=out, lse=lse, c=key[1]:
                      A.flash_backward(g, q, k, v, out, lse, None, c, 1 / math.sqrt(d)))
                try:
                    ms = _median_ms(ember, fn, iters, hide_host=True)
                except Exception as exc:  # a configuration Triton cannot build
                    print(f"tune bwd forms {var}: failed ({type(exc).__name__}: {str(exc)[:120]})", flush=True)
                    ms = float("inf")
                if pass_ == 0:
                    got = fn()
                    errs[(var, key)] = max(float((torch.from_dlpack(x).float() - r).norm() / r.norm())
                                           for x, r in zip(got, ref))
                times[(var, key)] = min(ms, times.get((var, key), ms))
    rows = []
    keys = [c[0] for c in cases]
    best = {key: min(v for (var, k2), v in times.items() if k2 == key) for key in keys}

    def score(var):
        total = 0.0
        for key in keys:
            if errs.get((var, key), 1.0) > 2e-2:
                return float("inf")
            total += times.get((var, key), float("inf")) / best[key]
        return total

    for var in variants:
        cells = " / ".join(f"{times.get((var, key), float('nan')):.4f}" for key in keys)
        err = max(errs.get((var, key), 0.0) for key in keys)
        row = {"name": f"tune bwd {var[0]} form={var[1]} {var[2]} lpt={var[3]} diag_last={var[4]}", "ember": cells,
               "torch": f"err {err:.1e}", "ratio": round(score(var), 3),
               "unit": "ms (T1024 causal / non / T4096 causal / non)"}
        rows.append(row)
        print(row["name"], row["ember"], row["torch"], "score", row["ratio"], flush=True)
    torch_cells = " / ".join(f"{c[8]:.4f}" for c in cases)
    rows.append({"name": "torch SDPA bwd (fwd+bwd - fwd)", "ember": "", "torch": torch_cells, "ratio": "",
                 "unit": "ms (same order)"})
    print("torch bwd", torch_cells, flush=True)
    chosen = min(variants, key=score)
    apply_bwd_form(A, chosen, saved)
    print(f"tune bwd forms: CHOSEN {chosen} (score {score(chosen):.3f})", flush=True)
    rows.append({"name": f"tune bwd forms chosen {chosen}", "ember": "", "torch": "", "ratio": "", "unit": ""})
    return rows


# The session-16 sweep (--tune-grid), per causal flag: forward tiles (per length class), dK/dV tiles with and without
# DP_FIRST (dQ at its default), then dQ tiles with and without DP_FIRST (dK/dV at its winner). Configurations that
# spill hundreds of bytes per thread in their sm_90 build (ptxas -v with Triton 3.6: dK/dV (64, 128, 4, 3),
# (128, 128, 8, 2); dQ (128, 64, 4, 3)) are left out.
GRID_FWD = ((64, 64, 4, 3), (64, 64, 4, 4), (128, 64, 4, 3), (128, 64, 4, 4), (128, 64, 8, 3), (128, 64, 8, 4),
            (128, 128, 8, 3), (128, 128, 8, 2), (128, 32, 4, 3), (64, 128, 4, 3))
GRID_DKDV = ((64, 64, 4, 3), (64, 64, 4, 4), (64, 64, 4, 2), (64, 128, 8, 3), (64, 128, 8, 2), (32, 64, 4, 3),
             (32, 128, 4, 3), (32, 128, 4, 4), (128, 64, 8, 3))
GRID_DQ = ((64, 64, 4, 4), (64, 64, 4, 3), (128, 64, 8, 3), (128, 32, 4, 3), (128, 64, 8, 2), (128, 128, 8, 2),
           (128, 32, 8, 3), (64, 32, 4, 3))
# The tensor-descriptor forward (_ops_attention._FWD_TMA), its loop warp-specialized or not (Triton 3.6 does so on
# sm_90 with 4 warps only: 8 build as without).
GRID_FWD_TMA = ((128, 64, 4, 3), (128, 64, 4, 2), (64, 64, 4, 3), (128, 128, 4, 2), (128, 64, 8, 3))
# The tensor-descriptor dQ kernel (_ops_attention._DQ_TMA), not warp-specialized: Triton 3.6's pass fails on it with
# ember's divisibility hints at every D64 shape tried (the launcher would fall back to the plain build).
GRID_DQ_TMA = ((64, 64, 4, 3), (64, 64, 4, 2), (128, 64, 4, 3), (128, 32, 4, 3), (128, 64, 8, 3))
# The tensor-descriptor dK/dV kernel (_ops_attention._DKDV_TMA), with 4-warp tiles also capped at 168 registers per
# thread (3 programs per multiprocessor; its sm_90 build spills 28-52 bytes) or warp-specialized (2 and 3 stages).
GRID_DKDV_TMA = ((64, 64, 4, 3), (64, 64, 4, 2), (32, 64, 4, 3), (64, 128, 8, 3), (64, 64, 4, 4))
# dK/dV tiles with an additive (1, 1, T, T) float mask, non-causal (_ops_attention._BIAS_DKDV_D64).
GRID_BIAS = ((64, 64, 4, 3), (32, 64, 4, 3), (32, 64, 4, 2), (64, 128, 8, 3))


def grid_variants():
    """(kind, causal, configuration, flag) of every variant --tune-grid times; kind is fwd, fwd_tma (flag: warp
    specialized), dkdv, dq (flag: DP_FIRST), dq_tma (flag: warp specialized), dkdv_tma (flag: register cap or "ws") or
    bias (also what host_cuda_fake.py's precompile_grid compiles)."""
    out = []
    for causal in (True, False):
        out += [("fwd", causal, cfg, False) for cfg in GRID_FWD if not (causal and cfg[0] % cfg[1])]
        # (warp-specialized loops are not taken: _ops_attention._warp_specialized)
        out += [("fwd_tma", causal, cfg, False) for cfg in GRID_FWD_TMA if not (causal and cfg[0] % cfg[1])]
        for kind, cfgs in (("dkdv", GRID_DKDV), ("dq", GRID_DQ)):
            # (a causal dK/dV tile needs BLOCK_N a multiple of BLOCK_M: _ops_attention refuses the others)
            out += [(kind, causal, cfg, dpf) for cfg in cfgs for dpf in (False, True)
                    if not (causal and kind == "dkdv" and cfg[1] % cfg[0])]
        out += [("dq_tma", causal, cfg, False) for cfg in GRID_DQ_TMA]
        out += [("dkdv_tma", causal, cfg, flag) for cfg in GRID_DKDV_TMA for flag in (None, 168)
                if (flag is None or cfg[:3] == (64, 64, 4)) and not (causal and cfg[1] % cfg[0])]
    return out + [("bias", False, cfg, False) for cfg in GRID_BIAS]


def grid_state(A):
    return A._FWD_SHORT, A._FWD_LONG, A._BWD_D64, A._DP_FIRST, A._BIAS_DKDV_D64, A._FWD_TMA, A._DQ_TMA, A._DKDV_TMA


def set_grid_state(A, state):
    (A._FWD_SHORT, A._FWD_LONG, A._BWD_D64, A._DP_FIRST, A._BIAS_DKDV_D64, A._FWD_TMA, A._DQ_TMA,
     A._DKDV_TMA) = state


def apply_grid(A, var, short=True):
    """Sets ``_ops_attention`` (``A``) to run the variant ``var`` of grid_variants() (the other kernels as they are);
    a forward variant applies to the length class of ``short`` (T <= 2048) or the other."""
    kind, causal, cfg, dpf = var

    def put(pair, x):
        return (x, pair[1]) if not causal else (pair[0], x)
    if kind in ("fwd", "fwd_tma"):
        if short:
            A._FWD_SHORT = put(A._FWD_SHORT, cfg)
        else:
            A._FWD_LONG = put(A._FWD_LONG, cfg)
        tma = list(A._FWD_TMA)
        tma[not short] = put(tma[not short], (kind == "fwd_tma", kind == "fwd_tma" and dpf))
        A._FWD_TMA = tuple(tma)
    elif kind == "bias":
        A._BIAS_DKDV_D64 = cfg
    elif kind in ("dkdv", "dkdv_tma"):
        A._BWD_D64 = put(A._BWD_D64, (cfg, A._BWD_D64[causal][1]))
        A._DP_FIRST = put(A._DP_FIRST, (A._DP_FIRST[causal][0], kind == "dkdv" and dpf))
        A._DKDV_TMA = put(A._DKDV_TMA, (kind == "dkdv_tma", dpf if kind == "dkdv_tma" and dpf != "ws" else None,
                                         kind == "dkdv_tma" and dpf == "ws"))
    else:  # dq or dq_tma
        A._BWD_D64 = put(A._BWD_D64, (A._BWD_D64[causal][0], cfg))
        A._DP_FIRST = put(A._DP_FIRST, (kind == "dq" and dpf, A._DP_FIRST[causal][1]))
        A._DQ_TMA = put(A._DQ_TMA, (kind == "dq_tma", kind == "dq_tma" and dpf))


def _tune_grid(torch, iters, budget_s=200.0):
    """The forward and the backward alone (``flash_forward``; ``flash_backward`` on a saved forward), B8 H12 D64 bf16
    at T1024 and T4096, causal and not, under each of grid_variants(), in stages (forward and dK/dV variants, then dQ
    variants, pointer and tensor-descriptor kernels, with dK/dV at its winner, then the masked dK/dV tiles); two
    passes each (the second in reverse order), the better median of each; results checked against torch's. Winners
    (per causal flag; the forward's also per length class) are left set."""
    import math

    from ember._cuda import _ops_attention as A

    t_start = time.time()
    b, h, d = 8, 12, 64
    F = torch.nn.functional
    cases = {}
    torch_ms = {}
    for tt in (1024, 4096):
        for causal in (True, False):
            tq, tk, tv = _qkv(torch, torch, b, h, tt, d, seed=tt + causal)
            gt = torch.randn_like(tq)
            out_t = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
            out_t.backward(gt)
            ref = [x.grad.float() for x in (tq, tk, tv)]
            q, k, v = (ember.from_dlpack(x.detach()) for x in (tq, tk, tv))
            g = ember.from_dlpack(gt)
            with ember.no_grad():
                out, lse = A.flash_forward(q, k, v, None, causal, 1 / math.sqrt(d))
            cases[(tt, causal)] = (q, k, v, g, out, lse, ref, out_t.detach().float(), None)
            if not causal:  # the same inputs with an additive mask, for the "bias" variants
                mask_t = torch.randn(1, 1, tt, tt, device="cuda", dtype=torch.bfloat16)
                xs = [x.detach().requires_grad_() for x in (tq, tk, tv)]
                ref_b = torch.autograd.grad(F.scaled_dot_product_attention(*xs, attn_mask=mask_t), xs, gt)
                mask = ember.from_dlpack(mask_t)
                with ember.no_grad():
                    out_b, lse_b = A.flash_forward(q, k, v, mask, False, 1 / math.sqrt(d))
                cases[(tt, "bias")] = (q, k, v, g, out_b, lse_b, [x.float() for x in ref_b], None, mask)

                def bias_fn(xs=xs, gt=gt, m=mask_t):
                    torch.autograd.grad(F.scaled_dot_product_attention(*xs, attn_mask=m), xs, gt)

                def bias_fwd(xs=xs, m=mask_t):
                    with torch.no_grad():
                        F.scaled_dot_product_attention(*xs, attn_mask=m)
                fwd_b = _median_ms(torch, bias_fwd, iters, hide_host=True)
                torch_ms[(tt, "bias")] = (fwd_b, _median_ms(torch, bias_fn, iters, hide_host=True) - fwd_b)

            def both_fn(tq=tq, tk=tk, tv=tv, gt=gt, c=causal):
                torch.autograd.grad(F.scaled_dot_product_attention(tq, tk, tv, is_causal=c), (tq, tk, tv), gt)

            def fwd_fn(tq=tq, tk=tk, tv=tv, c=causal):
                with torch.no_grad():
                    F.scaled_dot_product_attention(tq, tk, tv, is_causal=c)
            fwd = _median_ms(torch, fwd_fn, iters, hide_host=True)
            torch_ms[(tt, causal)] = (fwd, _median_ms(torch, both_fn, iters, hide_host=True) - fwd)
            bwd = torch_ms[(tt, causal)][1]
            print(f"torch T{tt}{' causal' if causal else ''}: fwd {fwd:.4f} ms, bwd ~{bwd:.4f} ms", flush=True)
    saved = grid_state(A)
    times: dict = {}
    errs: dict = {}

    def run(var, tt):
        kind, causal = var[0], var[1]
        q, k, v, g, out, lse, ref, ref_out, mask = cases[(tt, "bias" if kind == "bias" else causal)]
        apply_grid(A, var, short=tt <= 2048)
        if kind in ("fwd", "fwd_tma"):
            def fn():
                with ember.no_grad():
                    return A.flash_forward(q, k, v, None, causal, 1 / math.sqrt(d))[0]
        else:
            def fn():
                return A.flash_backward(g, q, k, v, out, lse, mask, causal, 1 / math.sqrt(d))
        try:
            ms = _median_ms(ember, fn, iters, hide_host=True)
        except Exception as exc:  # a configuration Triton cannot build
            print(f"tune grid {var}: failed ({type(exc).__name__}: {str(exc)[:120]})", flush=True)
            return
        key = (var, tt)
        if key not in errs:
            got = fn()
            if kind in ("fwd", "fwd_tma"):
                errs[key] = float((torch.from_dlpack(got).float() - ref_out).abs().max())
            else:
                errs[key] = max(float((torch.from_dlpack(x).float() - r).norm() / r.norm()) for x, r in zip(got, ref))
        times[key] = min(ms, times.get(key, ms))

    def stage(variants):
        for pass_ in range(2):
            for var in variants if pass_ == 0 else variants[::-1]:
                if time.time() - t_start > budget_s:
                    print(f"tune grid: time budget ({budget_s} s) spent", flush=True)
                    return
                for tt in (1024, 4096):
                    run(var, tt)
                    set_grid_state(A, state)

    def winner(variants, tts):
        def score(var):
            total = 0.0
            for tt in tts:
                best = min(times.get((w, tt), float("inf")) for w in variants)
                # bf16 output's max error / gradients' relative error
                limit = 3e-2 if var[0].startswith("fwd") else 2e-2
                if errs.get((var, tt), 1.0) > limit:
                    return float("inf")
                total += times.get((var, tt), float("inf")) / best
            return total
        return min(variants, key=score), score

    variants = grid_variants()
    state = saved
    stage([v for v in variants if v[0] not in ("dq", "dq_tma", "bias")])  # forward and dK/dV variants
    chosen = {}
    for causal in (True, False):
        for tt in (1024, 4096):
            fwd = [v for v in variants if v[0] in ("fwd", "fwd_tma") and v[1] == causal]
            chosen[("fwd", causal, tt)] = winner(fwd, (tt,))[0]
        dkdv = [v for v in variants if v[0] in ("dkdv", "dkdv_tma") and v[1] == causal]
        chosen[("dkdv", causal)] = winner(dkdv, (1024, 4096))[0]
    for key, var in chosen.items():
        apply_grid(A, var, short=len(key) == 2 or key[2] <= 2048)
    state = grid_state(A)
    stage([v for v in variants if v[0] in ("dq", "dq_tma")])
    for causal in (True, False):
        dq = [v for v in variants if v[0] in ("dq", "dq_tma") and v[1] == causal]
        chosen[("dq", causal)] = winner(dq, (1024, 4096))[0]
        apply_grid(A, chosen[("dq", causal)])
    state = grid_state(A)
    bias = [v for v in variants if v[0] == "bias"]
    stage(bias)
    chosen[("bias", False)] = winner(bias, (1024, 4096))[0]
    apply_grid(A, chosen[("bias", False)])
    rows = []
    for var in variants:
        cells = " / ".join(f"{times.get((var, tt), float('nan')):.4f}" for tt in (1024, 4096))
        err = max(errs.get((var, tt), float("nan")) for tt in (1024, 4096))
        flag = {"fwd_tma": "ws", "dq_tma": "ws", "dkdv_tma": "maxnreg/ws"}.get(var[0], "dp_first")
        row = {"name": f"tune grid {var[0]} {'causal ' if var[1] else ''}{var[2]} {flag}={var[3]}", "ember": cells,
               "torch": f"err {err:.1e}", "ratio": "", "unit": "ms (T1024 / T4096)"}
        rows.append(row)
        print(row["name"], row["ember"], row["torch"], flush=True)
    for (tt, causal), (fwd, bwd) in torch_ms.items():
        what = {True: " causal", False: "", "bias": " float mask"}[causal]
        rows.append({"name": f"torch SDPA T{tt}{what} fwd / bwd (fwd+bwd - fwd)", "ember": "",
                     "torch": f"{fwd:.4f} / {bwd:.4f}", "ratio": "", "unit": "ms"})
    print(f"tune grid: CHOSEN {sorted(chosen.items(), key=str)}", flush=True)
    print(f"tune grid: state _FWD_SHORT={A._FWD_SHORT} _FWD_LONG={A._FWD_LONG} _FWD_TMA={A._FWD_TMA} "
          f"_BWD_D64={A._BWD_D64} _DP_FIRST={A._DP_FIRST} _DQ_TMA={A._DQ_TMA} _DKDV_TMA={A._DKDV_TMA} "
          f"_BIAS_DKDV_D64={A._BIAS_DKDV_D64} "
          f"({time.time() - t_start:.0f} s)", flush=True)
    rows.append({"name": f"tune grid chosen {grid_state(A)}", "ember": "", "torch": "", "ratio": "", "unit": ""})
    return rows


def _tune_lpt(torch, iters):
    """Causal grids ordered heaviest tile first over all heads (``_ops_attention._LPT``) or per head, for the
    forward and for the backward's dQ and dK/dV kernels, at causal T1024 and T4096 (two alternating passes,
    the better median of each); the better ordering of each kernel is left set."""
    import math

    from ember._cuda import _ops_attention as A

    b, h, d = 8, 12, 64
    saved = A._LPT
    fwd_t, bwd_t = {}, {}
    cases = []
    for tt in (1024, 4096):
        q, k, v = _qkv(torch, ember, b, h, tt, d, seed=tt)
        g = ember.randn_like(q)
        with ember.no_grad():
            out, lse = A.flash_forward(q, k, v, None, True, 1 / math.sqrt(d))
        cases.append((tt, q, k, v, g, out, lse))
    bwd_variants = ((False, False), (True, False), (False, True), (True, True))
    for _ in range(2):
        for tt, q, k, v, g, out, lse in cases:
            for lpt in (False, True):
                A._LPT = (lpt, False, False)
                with ember.no_grad():
                    ms = _median_ms(ember, lambda q=q, k=k, v=v: A.flash_forward(q, k, v, None, True, 0.125), iters,
                                    hide_host=True)
                fwd_t[(tt, lpt)] = min(ms, fwd_t.get((tt, lpt), ms))
            for dq, dkdv in bwd_variants:
                A._LPT = (False, dq, dkdv)
                ms = _median_ms(ember, lambda q=q, k=k, v=v, g=g, out=out, lse=lse: A.flash_backward(
                    g, q, k, v, out, lse, None, True, 0.125), iters, hide_host=True)
                bwd_t[(tt, dq, dkdv)] = min(ms, bwd_t.get((tt, dq, dkdv), ms))
    rows = []
    for key, ms in list(fwd_t.items()) + list(bwd_t.items()):
        name = f"tune LPT fwd causal T{key[0]} lpt={key[1]}" if len(key) == 2 else \
            f"tune LPT bwd causal T{key[0]} dq={key[1]} dkdv={key[2]}"
        rows.append({"name": name, "ember": round(ms, 4), "torch": "", "ratio": "", "unit": "ms"})
        print(name, round(ms, 4), flush=True)

    def rel(table, key_of, variant):
        return sum(table[key_of(tt, variant)] / min(v for k, v in table.items() if k[0] == tt) for tt in (1024, 4096))

    fwd = min((False, True), key=lambda x: rel(fwd_t, lambda tt, x: (tt, x), x))
    bwd = min(bwd_variants, key=lambda x: rel(bwd_t, lambda tt, x: (tt, *x), x))
    A._LPT = (fwd, *bwd)
    print(f"tune LPT: CHOSEN {A._LPT} (was {saved})", flush=True)
    rows.append({"name": f"tune LPT chosen {A._LPT}", "ember": "", "torch": "", "ratio": "", "unit": ""})
    return rows


def _graph_rows(torch, steps):
    row = {"name": "MLP 3x256 fwd+bwd, batch 64: eager / graphed host us/step"}
    for label, fw in (("ember", ember), ("torch", torch)):
        fw.manual_seed(0)
        nn = fw.nn
        model = nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(),
                              nn.Linear(256, 10)).cuda()
        x = fw.randn(64, 256).cuda()
        y = fw.randint(0, 10, (64,)).cuda()
        F = fw.nn.functional
        out = []
        for graphed in (False, True):
            m = fw.cuda.make_graphed_callables(model, (x.clone(),)) if graphed else model

            def step(m=m, F=F, x=x, y=y):
                F.cross_entropy(m(x), y).backward()
            for _ in range(20):
                step()
            fw.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            fw.cuda.synchronize()
            out.append(round((time.perf_counter() - t0) / steps * 1e6, 1))
        row[label] = f"{out[0]} / {out[1]}"
        row[label + "_speedup"] = round(out[0] / out[1], 2)
    row["ratio"] = row["ember_speedup"]
    row["unit"] = "us (ratio: ember eager/graphed)"
    return [row]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--tune-only", action="store_true", help="only the configuration sweep")
    ap.add_argument("--tune-fwd-only", action="store_true", help="only the forward configuration sweep")
    ap.add_argument("--tune-bwd", action="store_true", help="only the backward sweep before the rows")
    ap.add_argument("--tune-fwd", action="store_true", help="only the forward sweep before the rows")
    ap.add_argument("--tune-lpt", action="store_true", help="the causal grids' tile order before the rows")
    ap.add_argument("--tune-bwd-forms", action="store_true", help="the backward's forms side by side first")
    ap.add_argument("--tune-grid", action="store_true", help="the session-16 tile/DP_FIRST sweep first")
    ap.add_argument("--no-graphs", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch

    iters = 10 if args.quick else 25
    sweep_only = args.tune_only or args.tune_fwd_only
    rows = []
    # The sweeps first: the rows below then run the configurations they chose.
    if args.tune or sweep_only or args.tune_fwd:
        rows += _tune(torch, iters, backward=not (args.tune_fwd_only or args.tune_fwd))
    elif args.tune_bwd:
        rows += _tune_bwd(torch, iters)
    if args.tune_lpt:
        rows += _tune_lpt(torch, iters)
    if args.tune_bwd_forms:
        rows += _tune_bwd_forms(torch, iters)
    if args.tune_grid:
        rows += _tune_grid(torch, iters)
    if not sweep_only:
        rows += _attention_rows(torch, iters, (1024,) if args.quick else (1024, 4096))
    if not sweep_only and not args.no_graphs:
        rows += _graph_rows(torch, 100 if args.quick else 300)
    print(f"{'case':58s} {'ember':>14s} {'torch':>14s} {'ratio':>7s}")
    for row in rows:
        lat = ""
        if "ember_lat_ms" in row:
            lat = f"  (host latency included, ms: {row['ember_lat_ms']} / {row['torch_lat_ms']})"
        print(f"{row['name']:58s} {row['ember']!s:>14} {row['torch']!s:>14} {row['ratio']!s:>7} {row['unit']}{lat}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
