"""Runs ember's fused Adam/AdamW kernel, the cross-entropy forward and one-pass backward kernels and the pooling
kernels in Triton's CPU interpreter against PyTorch on the CPU (``python fused_interp_check.py``;
test_cuda_fused_interpreter.py starts it in a fresh process, since TRITON_INTERPRET must be set
before Triton decorates the kernels). Prints one "ok" line per case."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import tempfile

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton.runtime.interpreter as interp  # noqa: E402


def _load(source: str, name: str):
    original = interp._patch_lang_tensor

    def patched(tensor, scope):  # NumPy 2 refuses int() of a 1-element array (loop bounds)
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interp._patch_lang_tensor = patched
    path = os.path.join(tempfile.mkdtemp(), f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.k


def check_adam():
    from ember._cuda._ops_optim import _ADAM

    k = _load(_ADAM, "ember_adam_interp")
    g = torch.Generator().manual_seed(0)
    for decoupled, maximize, wd, n, step in ((True, False, 0.1, 1100, 1.0), (False, True, 0.05, 517, 7.0)):
        p, gr = torch.randn(n, generator=g), torch.randn(n, generator=g)
        m, v = torch.randn(n, generator=g) * 0.1, torch.rand(n, generator=g) * 0.01
        ref = [t.clone() for t in (p, gr, m, v)]
        lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-8
        fn = torch._fused_adamw_ if decoupled else torch._fused_adam_
        fn([ref[0]], [ref[1]], [ref[2]], [ref[3]], [], [torch.tensor(step)], lr=lr, beta1=b1, beta2=b2,
           weight_decay=wd, eps=eps, amsgrad=False, maximize=maximize)
        step_size, bc2 = lr / (1 - b1 ** step), math.sqrt(1 - b2 ** step)
        block = 1024
        k[(-(-n // block),)](p, gr, m, v, n, lr, b1, b2, eps, wd, step_size, bc2, BLOCK=block, DECOUPLED=decoupled,
                             MAXIMIZE=maximize)
        for got, want in zip((p, m, v), (ref[0], ref[2], ref[3])):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        print("ok adam", decoupled, maximize)


def check_adam_chunks():
    """The one-launch form: a table of chunks over several parameters of different lengths and steps
    (a chunk length far below the real one, so parameters span several chunks)."""
    from ember._cuda import _ops_optim

    chunk, block = 256, 128
    source = _ops_optim._ADAM_CHUNKS.replace("__ELEM__", "tl.float32")
    k = _load(source, "ember_adam_chunks_interp")
    g = torch.Generator().manual_seed(5)
    sizes = (1000, 3, 256, 600)
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-8, 0.1
    for decoupled, uniform in ((True, False), (False, False), (True, True)):
        steps = (3.0,) * 4 if uniform else (1.0, 4.0, 2.0, 9.0)
        tensors = [[torch.randn(n, generator=g), torch.randn(n, generator=g), torch.randn(n, generator=g) * 0.1,
                    torch.rand(n, generator=g) * 0.01] for n in sizes]
        refs = [[t.clone() for t in group] for group in tensors]
        fn = torch._fused_adamw_ if decoupled else torch._fused_adam_
        for group, step in zip(refs, steps):
            fn([group[0]], [group[1]], [group[2]], [group[3]], [], [torch.tensor(step)], lr=lr, beta1=b1, beta2=b2,
               weight_decay=wd, eps=eps, amsgrad=False, maximize=False)
        saved, _ops_optim.CHUNK = _ops_optim.CHUNK, chunk
        try:
            table = _ops_optim.chunk_table([t.data_ptr() for group in tensors for t in group], sizes,
                                           [lr / (1 - b1 ** s) for s in steps],
                                           [math.sqrt(1 - b2 ** s) for s in steps], 4)
        finally:
            _ops_optim.CHUNK = saved
        assert len(table) == sum(-(-n // chunk) for n in sizes)
        if uniform:  # the step size comes from the launch; the table's float columns are not read
            table[:, 5:] = 0
        k[(len(table),)](torch.from_numpy(table), lr, b1, b2, eps, wd, lr / (1 - b1 ** 3.0),
                         math.sqrt(1 - b2 ** 3.0), CHUNK=chunk, BLOCK=block, DECOUPLED=decoupled, MAXIMIZE=False,
                         UNIFORM=uniform)
        for group, ref in zip(tensors, refs):
            for got, want in zip((group[0], group[2], group[3]), (ref[0], ref[2], ref[3])):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        print("ok adam chunks", decoupled, uniform)


def _ce_rows(x, specials):
    """Rows with infinite and NaN scores (PyTorch's loss and gradient are NaN throughout such a
    row where the max is infinite or a score is NaN; a -inf score elsewhere is an ordinary 0)."""
    if specials:
        x[0, 3] = float("inf")
        x[2, :] = -float("inf")
        x[3, 5] = float("nan")
        x[4, 0] = -float("inf")
    return x


def check_ce_forward():
    """``_class_nll``'s kernel: nll, smooth, wt and the row's log-sum-exp (the backward's saved
    input) against PyTorch, float32 and float64 statistics, rows wider than a block."""
    from ember._cuda._ops_loss import _CLASS_NLL

    g = torch.Generator().manual_seed(6)
    for ct, dtype in (("tl.float32", torch.float32), ("tl.float64", torch.float64)):
        k = _load(_CLASS_NLL.replace("__CT__", ct), f"ember_ce_fwd_interp_{ct[3:]}")
        for rows, c, block, use_w, smooth, specials in ((7, 37, 16, False, True, True), (6, 70, 32, True, True, False),
                                                        (5, 19, 32, True, False, True)):
            x = _ce_rows(torch.randn(rows, c, generator=g, dtype=dtype), specials)
            t = torch.randint(0, c, (rows,), generator=g)
            t[1] = -100  # ignored row
            if specials:
                t[2] = -100  # an ignored row of -inf scores: its lse is NaN still
            w = (torch.rand(c, generator=g, dtype=dtype) + 0.5) if use_w else None
            nll, sm, wt, lse = (torch.full((rows,), 7.0, dtype=dtype) for _ in range(4))
            k[(rows,)](x, t, w if w is not None else x, nll, sm, wt, lse, c, -100, BLOCK=block, LOGP=False,
                       HAS_W=w is not None, SMOOTH=smooth)
            keep = t != -100
            want_lse = torch.logsumexp(x, 1)
            # PyTorch's logsumexp is inf for a row with an infinite score; the loss it feeds is NaN
            # (log_softmax's x - max): the saved lse is NaN there, so that the gradient is NaN too
            inf_max = x.amax(1).isinf()
            want_lse[inf_max] = float("nan")
            torch.testing.assert_close(lse, want_lse, equal_nan=True)
            ref = torch.nn.functional.nll_loss(torch.log_softmax(x, 1), t, weight=w, reduction="none")
            torch.testing.assert_close(nll, ref, equal_nan=True)
            torch.testing.assert_close(wt, torch.where(keep, 1.0 if w is None else w[t.clamp(min=0)], 0.0).to(dtype))
            if smooth:
                wv = torch.ones(c, dtype=dtype) if w is None else w
                ref_sm = torch.where(keep, -(torch.log_softmax(x, 1) * wv).sum(1), 0.0)
                torch.testing.assert_close(sm, ref_sm, equal_nan=True)
            print("ok ce_forward", ct, rows, c, use_w, smooth, specials)


def check_ce_forward_huge():
    """``_class_nll``'s loss for rows of huge scores, whose log-sum-exp rounds to their max: the loss
    is (x[t] - max) - log(sum), not x[t] - lse (which gave 0 for equal scores, torch log(C))."""
    from ember._cuda._ops_loss import _CLASS_NLL

    k = _load(_CLASS_NLL.replace("__CT__", "tl.float32"), "ember_ce_fwd_interp_huge")
    for scale in (1e30, -1e30, 1e5, 3.0):
        for log_probs in (False, True):
            g = torch.Generator().manual_seed(0)
            x = ((scale + torch.randn(5, 9, generator=g, dtype=torch.float64)) if abs(scale) < 1e6 else
                 (scale * (1 + torch.rand(5, 9, generator=g) * 1e-3))).float()
            x[0] = scale  # equal scores: the loss is log(9) exactly
            t = torch.randint(0, 9, (5,), generator=g)
            t[1] = -100
            xi = torch.log_softmax(x, 1) if log_probs else x
            nll, wt, lse = torch.empty(5), torch.empty(5), torch.empty(5)
            k[(5,)](xi, t, xi, nll, torch.empty(0), wt, lse, 9, -100, BLOCK=16, LOGP=log_probs, HAS_W=False,
                    SMOOTH=False)
            ref = torch.nn.functional.cross_entropy(x, t, reduction="none")
            torch.testing.assert_close(nll, ref, rtol=1e-5, atol=1e-6)
            # the smoothing term -sum(log_softmax) (was 1e-3 off for 1e5 + N(0, 1) rows, 5e-5 for 1e30 ones)
            sm = torch.empty(5)
            k[(5,)](xi, t, xi, nll, sm, wt, lse, 9, -100, BLOCK=16, LOGP=log_probs, HAS_W=False, SMOOTH=True)
            want = torch.where(t != -100, -torch.log_softmax(x.double(), 1).sum(1), 0.0)
            torch.testing.assert_close(sm.double(), want, rtol=2e-6, atol=1e-5)
            print("ok ce_forward huge", scale, log_probs)


def check_ce_backward():
    from ember._cuda._ops_loss import _CLASS_NLL, _CLASS_NLL_BACKWARD

    k = _load(_CLASS_NLL_BACKWARD.replace("__CT__", "tl.float32"), "ember_ce_bwd_interp")
    fwd = _load(_CLASS_NLL.replace("__CT__", "tl.float32"), "ember_ce_fwd_for_bwd_interp")
    g = torch.Generator().manual_seed(1)
    for rows, c, block, use_w, smooth, logp, saved in ((6, 37, 16, False, 0.0, False, False),
                                                       (5, 70, 32, True, 0.2, False, False),
                                                       (4, 19, 32, True, 0.1, True, False),
                                                       (6, 37, 16, False, 0.0, False, True),
                                                       (5, 70, 32, True, 0.2, False, True),
                                                       (7, 45, 16, False, 0.1, False, True)):
        x = _ce_rows(torch.randn(rows, c, generator=g, dtype=torch.float64).float(), saved and rows == 7)
        if logp:
            x = x.log_softmax(1)
        t = torch.randint(0, c, (rows,), generator=g)
        t[1] = -100  # ignored row
        if saved and rows == 7:
            t[2] = -100  # ignored, all -inf: PyTorch's gradient is NaN there (0 * softmax)
        w = torch.rand(c, generator=g) + 0.5 if use_w else None
        xr = x.clone().requires_grad_()
        if logp:
            loss = torch.nn.functional.nll_loss(xr, t, weight=w, reduction="none")
            if smooth:
                keep = (t != -100).float()
                loss = (1 - smooth) * loss + smooth * (-(xr * (w if w is not None else 1)).sum(1) * keep)
        else:
            loss = torch.nn.functional.cross_entropy(xr, t, weight=w, reduction="none", label_smoothing=smooth)
        gout = torch.randn(rows, generator=g)
        loss.backward(gout)
        # _class_nll's outputs: nll and smooth, combined by the caller as (1 - s) nll + s / C smooth.
        gn = gout * (1 - smooth)
        gs = gout * smooth / (1 if logp else c) if smooth else None
        out = torch.empty(rows, c)
        lse = torch.full((rows,), 123.0)  # the forward kernel's lse, where the backward reads it
        if saved:
            nll, sm, wt = torch.empty(rows), torch.empty(rows), torch.empty(rows)
            fwd[(rows,)](x, t, w if w is not None else x, nll, sm, wt, lse, c, -100, BLOCK=block, LOGP=False,
                         HAS_W=w is not None, SMOOTH=False)
        k[(rows,)](x, t, w if w is not None else x, gn, gs if gs is not None else x, out, lse, c, -100, 1, 1,
                   BLOCK=block, LOGP=logp, HAS_W=w is not None, HAS_N=True, HAS_S=gs is not None, HAS_LSE=saved)
        torch.testing.assert_close(out, xr.grad, rtol=1e-4, atol=1e-5, equal_nan=True)
        print("ok ce_backward", rows, c, use_w, smooth, logp, saved)


def check_ce_backward_huge():
    """The backward for rows of huge scores, whose log-sum-exp rounds in float32: a saved |lse| > 256
    is not read (the row's max and exp sum are recomputed, exp((x - max) - log(sum))), nor is a
    recomputed lse rounded to one float; gradients against float64 PyTorch from the same float32
    scores (before, 1e5 + N(0, 1) rows were ~1% off and 1e30 rows had every probability 1)."""
    from ember._cuda._ops_loss import _CLASS_NLL, _CLASS_NLL_BACKWARD

    k = _load(_CLASS_NLL_BACKWARD.replace("__CT__", "tl.float32"), "ember_ce_bwd_interp_huge")
    fwd = _load(_CLASS_NLL.replace("__CT__", "tl.float32"), "ember_ce_fwd_for_bwd_interp_huge")
    g = torch.Generator().manual_seed(7)
    rows, c = 8, 37
    for scale, spread in ((1e30, 1e-3), (-1e30, 1e-3), (1e5, 0.0), (-3e4, 0.0), (300.0, 0.0), (100.0, 0.0)):
        for saved, use_w, smooth in ((True, False, 0.0), (False, False, 0.0), (True, True, 0.2)):
            noise = torch.randn(rows, c, generator=g, dtype=torch.float64)
            x = (scale * (1 + spread * noise) if spread else scale + noise).float()
            x[0] = x[0, 0]  # equal scores: every probability 1/C
            t = torch.randint(0, c, (rows,), generator=g)
            t[1] = -100
            w = torch.rand(c, generator=g) + 0.5 if use_w else None
            xr = x.double().requires_grad_()
            loss = torch.nn.functional.cross_entropy(xr, t, weight=None if w is None else w.double(),
                                                     reduction="none", label_smoothing=smooth)
            gout = torch.randn(rows, generator=g, dtype=torch.float64)
            loss.backward(gout)
            gn = (gout * (1 - smooth)).float()
            gs = (gout * smooth / c).float() if smooth else None
            lse = torch.full((rows,), 123.0)
            if saved:
                nll, wt = torch.empty(rows), torch.empty(rows)
                fwd[(rows,)](x, t, w if w is not None else x, nll, torch.empty(0), wt, lse, c, -100, BLOCK=16,
                             LOGP=False, HAS_W=w is not None, SMOOTH=False)
            out = torch.empty(rows, c)
            k[(rows,)](x, t, w if w is not None else x, gn, gs if gs is not None else x, out, lse, c, -100, 1, 1,
                       BLOCK=16, LOGP=False, HAS_W=w is not None, HAS_N=True, HAS_S=gs is not None, HAS_LSE=saved)
            torch.testing.assert_close(out.double(), xr.grad, rtol=2e-5, atol=2e-6)
            print("ok ce_backward huge", scale, saved, use_w, smooth)


def check_pooling():
    from ember._cuda._ops_pool import _BACKWARD, _FORWARD

    fwd = _load(_FORWARD.replace("__CT__", "tl.float32").replace("__LOWEST__", "-float('inf')"), "ember_pool_f")
    bwd = _load(_BACKWARD.replace("__CT__", "tl.float32"), "ember_pool_b")
    g = torch.Generator().manual_seed(2)
    F = torch.nn.functional
    cases = [("max", (3, 3), (2, 2), (1, 1), (1, 1), True, True, None),
             ("max", (3, 2), (1, 2), (1, 0), (2, 1), False, True, None),
             ("avg", (3, 3), (2, 2), (1, 1), (1, 1), True, True, None),
             ("avg", (3, 2), (2, 1), (1, 1), (1, 1), False, False, None),
             ("avg", (2, 2), (2, 2), (0, 0), (1, 1), True, False, 3)]
    for kind, k, s, p, d, ceil, include_pad, divisor in cases:
        x = torch.randn(2, 3, 9, 8, generator=g)
        x[0, 1, 2, 3] = float("nan")
        xr = x.clone().requires_grad_()
        if kind == "max":
            ref, ref_idx = F.max_pool2d(xr, k, s, p, d, ceil_mode=ceil, return_indices=True)
        else:
            ref = F.avg_pool2d(xr, k, s, p, ceil_mode=ceil, count_include_pad=include_pad, divisor_override=divisor)
        gout = torch.randn(ref.shape, generator=g)
        ref.backward(gout)
        oh, ow = ref.shape[-2:]
        total = 6 * oh * ow
        out, idx = torch.empty(ref.shape), torch.empty(ref.shape, dtype=torch.int64)
        args = (total, 9, 8, oh, ow, k[0], k[1], s[0], s[1], p[0], p[1])
        fwd[(-(-total // 64),)](x, out, idx, *args, d[0], d[1], divisor or 0, BLOCK=64, MAX=kind == "max",
                                WITH_IDX=True, INCLUDE_PAD=include_pad)
        torch.testing.assert_close(out, ref.detach(), equal_nan=True)
        if kind == "max":
            assert torch.equal(idx, ref_idx), (idx, ref_idx)
        gi = torch.zeros(x.shape)
        bwd[(-(-total // 64),)](gout, gi, idx, *args, divisor or 0, BLOCK=64, MAX=kind == "max",
                                INCLUDE_PAD=include_pad)
        torch.testing.assert_close(gi, xr.grad)
        print("ok pool", kind, k, s, p, d, ceil, include_pad, divisor)


def check_cummax():
    from ember._cuda._ops_more import _SCAN_INDEXED

    g = torch.Generator().manual_seed(3)
    for name, cmp in (("cummax", ">="), ("cummin", "<=")):
        k = _load(_SCAN_INDEXED.replace("__CT__", "tl.float32").replace("__CMP__", cmp), f"ember_{name}_interp")
        x = torch.randint(-3, 4, (3, 45), generator=g).float()  # many ties
        x[1, 10] = float("nan")
        x[1, 20] = float("nan")
        out, idx = torch.empty_like(x), torch.empty(x.shape, dtype=torch.int64)
        k[(3,)](x, out, idx, 45, BLOCK=16)
        ref = getattr(torch, name)(x, 1)
        torch.testing.assert_close(out, ref.values, equal_nan=True)
        assert torch.equal(idx, ref.indices), (idx, ref.indices)
        print("ok", name)


def check_split_col_reduction():
    """A column reduction split into chunks of rows (_reduce.reduce_into: the column kernel over
    outer * split groups into partials, then over the partials), against PyTorch."""
    import ember
    from ember._cuda._reduce import _PARTIALS, _col_source, col_split

    g = torch.Generator().manual_seed(4)
    outer, n, inner, bk = 2, 2048, 80, 64
    split = col_split(outer, n, inner, bk, 8)
    # 2 x 2 column blocks on 8 multiprocessors at COL_CONFIG's 8 programs each: split until 64 programs.
    assert split == 16, split
    for kind, scale, ref in (("sum", 0.5, lambda x: x.sum(1) * 0.5), ("nansum", 1.0, lambda x: x.nansum(1)),
                             ("max", 1.0, lambda x: x.amax(1))):
        x = torch.randn(outer, n, inner, generator=g)
        x[1, 1500, 7] = float("nan")
        blocks = -(-inner // bk)
        first = _load(_col_source(kind, ember.float32, ember.float32), f"ember_col_{kind}_interp")
        second = _load(_col_source(_PARTIALS.get(kind, kind), ember.float32, ember.float32),
                       f"ember_col_{kind}_partials_interp")
        partial, out = torch.empty(outer * split, inner), torch.empty(outer, inner)
        first[(outer * split, blocks)](x, partial, n // split, inner, 1.0, BN=32, BK=bk, SCALED=False)
        second[(outer, blocks)](partial, out, split, inner, scale, BN=8, BK=bk, SCALED=scale != 1.0)
        torch.testing.assert_close(out, ref(x), rtol=1e-5, atol=1e-4, equal_nan=True)
        print("ok split column", kind)


if __name__ == "__main__":
    check_adam()
    check_adam_chunks()
    check_ce_forward()
    check_ce_forward_huge()
    check_ce_backward()
    check_ce_backward_huge()
    check_pooling()
    check_cummax()
    check_split_col_reduction()
