"""Runs ember's scattering CUDA kernels (scatter with every reduction, the atomic sum, index_put,
masked_scatter, nonzero), the adaptive pooling and the sort kernels in Triton's CPU interpreter
against PyTorch on the CPU (test_cuda_scatter_interpreter.py starts it in a fresh process: TRITON_INTERPRET must be set
before Triton decorates the kernels). Prints one "ok" line per case."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
from fused_interp_check import _load  # noqa: E402

from ember._cuda import _scatter_kernels as K  # noqa: E402
from ember._cuda._ops_scatter import _identity  # noqa: E402

_CODES = {"sum": K.SUM, "prod": K.PROD, "amax": K.AMAX, "amin": K.AMIN}
_EMBER_DTYPE = {torch.float32: "float32", torch.int64: "int64", torch.int32: "int32"}


def _run_rows(dst, d, index, src, mode, include_self):
    ncols, length, cols, along = K.column_args(index.shape, d, index.stride(), src.stride(), dst.stride())
    k = _load(K.rows_source(len(cols) // 4), f"rows_{len(cols)}")
    import ember

    ident, _ = _identity(mode, getattr(ember, _EMBER_DTYPE[dst.dtype]))
    flag = torch.zeros(1, dtype=torch.int32)
    block = 16
    k[(-(-ncols // block),)](dst, index, src, flag, ncols, length, dst.shape[d], along[0], along[1], along[2], 3,
                            ident, *cols, BLOCK=block, MODE=mode, RESET=not include_self and mode != K.ASSIGN)
    return int(flag[0])


def check_scatter():
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.int64):
        for d in (0, 1, 2):
            base = torch.randn(4, 5, 6, generator=g) * 4
            base = base.to(dtype)
            ishape = [3, 4, 5]
            ishape[d] = 7
            index = torch.randint(0, base.shape[d], ishape, generator=g)
            src = torch.randn(8, 8, 8, generator=g).mul(4).to(dtype).transpose(0, 2)  # larger, non-contiguous
            dst = base.clone()
            assert _run_rows(dst, d, index, src, K.ASSIGN, True) == 0
            # Duplicates: the last write along a column wins, as on the CPU (PyTorch's CPU order).
            torch.testing.assert_close(dst, base.scatter(d, index, src))
            for reduce, mode in _CODES.items():
                for include_self in (True, False):
                    dst = base.clone()
                    _run_rows(dst, d, index, src, mode, include_self)
                    want = base.scatter_reduce(d, index, src, reduce, include_self=include_self)
                    torch.testing.assert_close(dst, want, rtol=1e-5, atol=1e-4)
            print("ok scatter", dtype, d)
    dst = torch.zeros(3, 4)
    bad = torch.tensor([[0, 5, 1, 2]])
    assert _run_rows(dst, 0, bad, torch.ones(1, 4), K.ASSIGN, True) == 3
    assert dst[:, 1].sum() == 0 and dst.sum() == 3, dst  # the bad entry is flagged and not written
    print("ok scatter flag")


def check_atomic():
    g = torch.Generator().manual_seed(1)
    dst = torch.randn(50, 7, generator=g)
    index = torch.randint(0, 50, (300,), generator=g)
    src = torch.randn(300, 7, generator=g)
    idx = index.view(300, 1).expand(300, 7)
    dims = K.atomic_args(idx.shape, 0, idx.stride(), src.stride(), dst.stride())
    k = _load(K.atomic_source(len(dims) // 4), f"atomic_{len(dims)}")
    want = dst.index_add(0, index, src)
    flag = torch.zeros(1, dtype=torch.int32)
    n = idx.numel()
    k[(-(-n // 64),)](dst, idx, src, flag, n, 50, dst.stride(0), 3, *dims, BLOCK=64)
    torch.testing.assert_close(dst, want, rtol=1e-5, atol=1e-5)
    print("ok atomic index_add")


def check_put_masked_nonzero():
    g = torch.Generator().manual_seed(2)
    put = _load(K.PUT, "put")
    dst = torch.randn(6, 5, generator=g)
    rows = torch.tensor([0, 3, 3, 5])
    vals = torch.randn(4, 5, generator=g)
    off = (rows.view(4, 1) * 5 + torch.arange(5)).contiguous()
    want = dst.index_put((rows,), vals, accumulate=True)
    put[(1,)](dst, off, vals, 20, BLOCK=32, ACC=True)
    torch.testing.assert_close(dst, want)
    print("ok index_put accumulate")
    ms = _load(K.MASKED_SCATTER, "masked_scatter")
    x = torch.randn(7, 9, generator=g)
    mask = torch.rand(7, 9, generator=g) > 0.5
    src = torch.randn(70, generator=g)
    want = x.masked_scatter(mask, src)
    csum = mask.reshape(-1).long().cumsum(0)
    flag = torch.zeros(1, dtype=torch.int32)
    ms[(3,)](x, mask, csum, src, flag, 63, 70, 4, BLOCK=32)
    torch.testing.assert_close(x, want)
    assert int(flag[0]) == 0
    ms[(3,)](x, mask, csum, src, flag, 63, 3, 4, BLOCK=32)  # a source too short: flagged
    assert int(flag[0]) == 4
    print("ok masked_scatter")
    for shape in ((5, 4, 3), (17,), (2, 1, 3, 2)):
        x = torch.rand(shape, generator=g) > 0.6
        flat = x.reshape(-1)
        csum = flat.long().cumsum(0)
        count = int(csum[-1])
        out = torch.full((count, len(shape)), -1, dtype=torch.int64)
        nz = _load(K.nonzero_source(len(shape)), f"nonzero_{len(shape)}")
        nz[(-(-flat.numel() // 16),)](flat, csum, out, flat.numel(), len(shape), *shape, BLOCK=16)
        torch.testing.assert_close(out, torch.nonzero(x))
    print("ok nonzero")


def check_adaptive_pooling():
    from ember._cuda._ops_adaptive import _BACKWARD, _FORWARD, _window

    fwd = _load(_FORWARD.replace("__CT__", "tl.float32"), "adaptive_f")
    bwd = _load(_BACKWARD.replace("__CT__", "tl.float32"), "adaptive_b")
    g = torch.Generator().manual_seed(3)
    F = torch.nn.functional
    for h, w, oh, ow in ((9, 7, 4, 3), (8, 8, 4, 2), (5, 6, 7, 6), (6, 5, 1, 1)):
        x = torch.randn(2, 3, h, w, generator=g)
        x[1, 2, 0, 0] = float("nan")
        total = 6 * oh * ow
        kh, kw = _window(h, oh), _window(w, ow)
        for is_max in (False, True):
            xr = x.clone().requires_grad_()
            if is_max:
                ref, ref_idx = F.adaptive_max_pool2d(xr, (oh, ow), return_indices=True)
            else:
                ref = F.adaptive_avg_pool2d(xr, (oh, ow))
            out = torch.empty(2, 3, oh, ow)
            idx = torch.empty(2, 3, oh, ow, dtype=torch.int64)
            fwd[(-(-total // 32),)](x, out, idx, total, h, w, oh, ow, kh, kw, BLOCK=32, MAX=is_max)
            torch.testing.assert_close(out, ref.detach(), equal_nan=True)
            if is_max:
                assert torch.equal(idx, ref_idx), (idx, ref_idx)
            gout = torch.randn(2, 3, oh, ow, generator=g)
            ref.backward(gout)
            gi = torch.zeros(2, 3, h, w)
            bwd[(-(-total // 32),)](gout, gi, idx if is_max else gout, total, h, w, oh, ow, kh, kw, BLOCK=32,
                                    MAX=is_max)
            torch.testing.assert_close(gi, xr.grad, rtol=1e-5, atol=1e-6)
        print("ok adaptive pooling", h, w, oh, ow)


def check_sort():
    from ember._cuda._ops_sort import SORT

    k = _load(SORT, "sort_rows")
    g = torch.Generator().manual_seed(4)
    for dtype, n in ((torch.float32, 37), (torch.float16, 64), (torch.int32, 100), (torch.uint8, 5)):
        if dtype.is_floating_point:
            x = torch.randn(3, n, generator=g).to(dtype)
            x[0, :6] = torch.tensor([float("nan"), 0.0, -0.0, float("inf"), -float("inf"), 1.0]).to(dtype)
            x[1, 3:9] = x[1, 0]  # ties keep their order (a stable sort)
        else:
            x = torch.randint(0, 6, (3, n), generator=g).to(dtype)
        bn = max(16, 1 << (n - 1).bit_length())
        for desc in (False, True):
            vals, idx = torch.empty_like(x), torch.empty(3, n, dtype=torch.int64)
            k[(3,)](x, vals, idx, n, BN=bn, FLOAT=dtype.is_floating_point, DESCENDING=desc)
            want_v, want_i = torch.sort(x, dim=-1, descending=desc, stable=True)
            assert torch.equal(idx, want_i), (dtype, desc, idx, want_i)
            torch.testing.assert_close(vals, want_v, equal_nan=True)
        print("ok sort", dtype, n)


def check_searchsorted():
    from ember._cuda._ops_search import SEARCH

    k = _load(SEARCH, "search_rows")
    g = torch.Generator().manual_seed(5)
    seq = torch.sort(torch.randint(0, 20, (3, 17), generator=g).float(), dim=-1).values
    seq[2, -2:] = float("nan")
    vals = torch.randint(-2, 23, (3, 9), generator=g).float()
    vals[1, 0] = float("nan")
    for right in (False, True):
        out = torch.empty(3, 9, dtype=torch.int64)
        k[(1,)](seq, vals, out, 17, 9, 27, 6, BLOCK=32, RIGHT=right)
        assert torch.equal(out, torch.searchsorted(seq, vals, right=right)), (right, out)
        flat = torch.empty(3, 9, dtype=torch.int64)
        k[(1,)](seq[0].contiguous(), vals, flat, 17, 27, 27, 6, BLOCK=32, RIGHT=right)  # one sequence for all
        assert torch.equal(flat, torch.searchsorted(seq[0], vals, right=right))
    print("ok searchsorted")


if __name__ == "__main__":
    check_searchsorted()
    check_sort()
    check_adaptive_pooling()
    check_scatter()
    check_atomic()
    check_put_masked_nonzero()
