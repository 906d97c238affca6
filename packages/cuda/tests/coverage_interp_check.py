"""Runs ember's CUDA integer power expression, its CUDA convolutions (``_ops_conv``: 1-d, 2-d and 3-d, plain
and transposed, grouped; ``_ops_depthwise``'s direct kernels) and its recurrent step and layer ops (``_ops_rnn``)
on the CPU: the Triton code in Triton's interpreter (libdevice's exp/tanh as NumPy's), the GEMMs as CPU matmuls, on
CPU tensors, against PyTorch's power, convolutions and their gradients and the CPU's native recurrent ops
(``python coverage_interp_check.py``; test_cuda_op_coverage.py starts it in a fresh process, since
TRITON_INTERPRET must be set before Triton decorates the kernels). Prints one "ok" line per case."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton.language as tl  # noqa: E402
from fused_interp_check import _load  # noqa: E402

import ember  # noqa: E402
from ember._cuda import _ops_conv as oc  # noqa: E402
from ember._cuda import _ops_depthwise as odw  # noqa: E402
from ember._cuda import _ops_rnn as orn  # noqa: E402

_KERNELS: dict = {}
_DEPTHWISE_LAUNCHES: list = []
_CELL_LAUNCHES: list = []


def _to_torch(t):
    return torch.from_numpy(np.ascontiguousarray(t.detach().numpy()))


def _launch(src, grid, args, consts, index, num_warps=4):
    """_compile.launch (the convolutions' and recurrent cells' kernels) in the interpreter: ember's CPU tensors as
    torch tensors sharing their memory."""
    name = {id(oc._IM2COL): "im2col", id(oc._COL2IM): "col2im", id(oc._IM2COL3): "im2col3",
            id(oc._COL2IM3): "col2im3", id(odw._FORWARD): "dw_forward", id(odw._INPUT_GRAD): "dw_input_grad",
            id(odw._WEIGHT_GRAD): "dw_weight_grad", id(orn._LSTM): "lstm", id(orn._LSTM_BACKWARD): "lstm_backward",
            id(orn._GRU): "gru", id(orn._GRU_BACKWARD): "gru_backward"}[id(src)]
    k = _KERNELS.get(name) or _KERNELS.setdefault(name, _load(src, f"ember_conv_{name}_interp"))
    k.fn.__globals__["libdevice"] = _LIBDEVICE  # (Triton's interpreter has no libdevice)
    if name.startswith("dw_"):
        _DEPTHWISE_LAUNCHES.append(name)
    elif name in ("lstm", "lstm_backward", "gru", "gru_backward"):
        _CELL_LAUNCHES.append(name)
    assert all(not hasattr(v, "data_ptr") or v.is_contiguous() for v in args.values())
    k[grid](*(torch.from_numpy(v.numpy()) if hasattr(v, "data_ptr") else v for v in args.values()), **consts)


def _numpy_unary(f):
    """A libdevice function in the interpreter: NumPy's on the tensor's data (the kernels call exp, tanh)."""
    from triton.runtime.interpreter import TensorHandle

    def call(x):
        return tl.core.tensor(TensorHandle(f(x.handle.data), x.handle.dtype.scalar), x.type)

    return call


_LIBDEVICE = SimpleNamespace(exp=_numpy_unary(np.exp), tanh=_numpy_unary(np.tanh))

odw._compile.launch = _launch
oc._product = lambda a, b: ember.matmul(a, b)

CASES = [  # (name, input shape, weight shape, stride, padding, dilation, transposed, output_padding, groups)
    ("conv2d", (2, 3, 7, 6), (4, 3, 3, 2), (1, 2), (1, 0), (1, 1), False, (0, 0), 1),
    ("conv2d grouped", (2, 4, 6, 6), (6, 2, 3, 3), (2, 1), (1, 1), (1, 2), False, (0, 0), 2),
    ("conv2d depthwise", (1, 3, 5, 5), (3, 1, 3, 3), (1, 1), (1, 1), (1, 1), False, (0, 0), 3),
    ("conv1d", (2, 3, 11), (5, 3, 3), (2,), (1,), (1,), False, (0,), 1),
    ("conv1d grouped dilated", (2, 4, 12), (4, 2, 3), (1,), (2,), (2,), False, (0,), 2),
    ("conv_transpose2d", (2, 3, 4, 5), (3, 2, 3, 3), (2, 2), (1, 0), (1, 1), True, (1, 0), 1),
    ("conv_transpose2d grouped dilated", (1, 4, 3, 4), (4, 3, 2, 3), (1, 2), (0, 1), (2, 1), True, (0, 1), 2),
    ("conv_transpose1d", (2, 3, 6), (3, 4, 4), (3,), (1,), (1,), True, (2,), 1),
    ("conv3d", (2, 3, 5, 4, 6), (4, 3, 3, 2, 3), (2, 1, 2), (1, 0, 1), (1, 2, 1), False, (0, 0, 0), 1),
    ("conv3d grouped", (1, 4, 4, 5, 3), (6, 2, 2, 3, 1), (1, 2, 1), (0, 1, 0), (2, 1, 1), False, (0, 0, 0), 2),
    # depthwise (_ops_depthwise's direct kernels): channel multipliers 1-3, strides, padding, dilation, 1-d,
    # non-square and 7x7 windows, positions in several splits of the weight gradient (2 * 24 * 24 > 4 blocks)
    ("depthwise 3x3 s2", (2, 4, 9, 8), (4, 1, 3, 3), (2, 2), (1, 1), (1, 1), False, (0, 0), 4),
    ("depthwise multiplier 2 dilated", (2, 3, 8, 9), (6, 1, 3, 2), (1, 2), (2, 0), (2, 1), False, (0, 0), 3),
    ("depthwise multiplier 3 7x7", (1, 2, 11, 10), (6, 1, 7, 7), (1, 1), (3, 3), (1, 1), False, (0, 0), 2),
    ("depthwise splits", (2, 3, 24, 24), (3, 1, 3, 3), (1, 1), (1, 1), (1, 1), False, (0, 0), 3),
    ("depthwise 1x1 stride 3 no padding", (2, 2, 7, 7), (4, 1, 1, 1), (3, 3), (0, 0), (1, 1), False, (0, 0), 2),
    ("depthwise conv1d", (2, 4, 13), (8, 1, 5), (2,), (2,), (1,), False, (0,), 4),
    ("conv_transpose3d", (2, 3, 3, 2, 4), (3, 2, 2, 3, 3), (2, 1, 2), (1, 1, 0), (1, 1, 1), True, (1, 0, 1), 1),
]


def check_convolutions():
    g = torch.Generator().manual_seed(0)
    for name, xs, ws, stride, padding, dilation, transposed, outpad, groups in CASES:
        x = torch.randn(xs, generator=g)
        w = torch.randn(ws, generator=g)
        bias = torch.randn(ws[1] * groups if transposed else ws[0], generator=g)
        xr, wr, br = (t.clone().requires_grad_() for t in (x, w, bias))
        ref = torch.ops.aten.convolution(xr, wr, br, list(stride), list(padding), list(dilation), transposed,
                                         list(outpad), groups)
        gout = torch.randn(ref.shape, generator=g)
        ref.backward(gout)
        ex, ew, eb = (ember.from_numpy(t.numpy().copy()) for t in (x, w, bias))
        _DEPTHWISE_LAUNCHES.clear()
        got = oc._convolution(ex, ew, eb, stride, padding, dilation, transposed, outpad, groups)
        torch.testing.assert_close(_to_torch(got), ref.detach(), rtol=1e-5, atol=1e-5)
        assert got._version == 0, got._version
        gi, gw, gb = oc._convolution_backward(ember.from_numpy(gout.numpy().copy()), ex, ew, [bias.shape[0]], stride,
                                              padding, dilation, transposed, outpad, groups, [True, True, True])
        for mine, want in ((gi, xr.grad), (gw, wr.grad), (gb, br.grad)):
            torch.testing.assert_close(_to_torch(mine), want, rtol=1e-5, atol=1e-5)
        gi, gw, gb = oc._convolution_backward(ember.from_numpy(gout.numpy().copy()), ex, ew, None, stride, padding,
                                              dilation, transposed, outpad, groups, [False, True, False])
        assert gi is None and gb is None
        torch.testing.assert_close(_to_torch(gw), wr.grad, rtol=1e-5, atol=1e-5)
        depthwise = groups == xs[1] and not transposed and len(xs) < 5
        # one launch each for the output, the two gradients, then the weight gradient alone
        assert _DEPTHWISE_LAUNCHES == (["dw_forward", "dw_input_grad", "dw_weight_grad", "dw_weight_grad"]
                                       if depthwise else []), (name, _DEPTHWISE_LAUNCHES)
        print("ok", name)


def check_depthwise_float64():
    """The depthwise kernels sum float64 data in float64 (1e-12 against torch), with and without a bias."""
    g = torch.Generator().manual_seed(3)
    for bias in (True, False):
        x = torch.randn(2, 3, 10, 9, dtype=torch.float64, generator=g) * 100
        w = torch.randn(6, 1, 3, 3, dtype=torch.float64, generator=g)
        b = torch.randn(6, dtype=torch.float64, generator=g) if bias else None
        xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
        ref = torch.nn.functional.conv2d(xr, wr, b, (2, 1), (1, 2), (1, 2), 3)
        gout = torch.randn(ref.shape, dtype=torch.float64, generator=g)
        ref.backward(gout)
        ex, ew = ember.from_numpy(x.numpy().copy()), ember.from_numpy(w.numpy().copy())
        eb = None if b is None else ember.from_numpy(b.numpy().copy())
        got = oc._convolution(ex, ew, eb, (2, 1), (1, 2), (1, 2), False, (0, 0), 3)
        assert got.dtype is ember.float64
        torch.testing.assert_close(_to_torch(got), ref.detach(), rtol=1e-12, atol=1e-12)
        gi, gw, _ = oc._convolution_backward(ember.from_numpy(gout.numpy().copy()), ex, ew, None, (2, 1), (1, 2),
                                             (1, 2), False, (0, 0), 3, [True, True, False])
        torch.testing.assert_close(_to_torch(gi), xr.grad, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(_to_torch(gw), wr.grad, rtol=1e-12, atol=1e-12)
        print("ok depthwise float64, bias", bias)


def check_integer_pow():
    """_exprs' "i" pow (_ipow, in the PRELUDE) for int64 and int32 compute: wrapping, 0 ** 0, negative
    exponents, a scalar exponent."""
    from ember._cuda._elementwise import HEADER
    from ember._cuda._exprs import BINARY

    expr = BINARY["pow"]["i"]
    src = HEADER + f"""
@triton.jit
def k(a, b, out, s, n, SCALAR: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(a + i, mask=m, other=0)
    if SCALAR:
        y = s
    else:
        y = tl.load(b + i, mask=m, other=0)
    tl.store(out + i, {expr.format("x", "y")}, mask=m)
"""
    k = _load(src, "ember_ipow_interp")
    g = torch.Generator().manual_seed(1)
    for dtype in (torch.int64, torch.int32):
        a = torch.cat([torch.tensor([-3, -2, -1, 0, 1, 2, 3, 0, 2, 3, -1, -1, 7, 1]),
                       torch.randint(-9, 10, (50,), generator=g)]).to(dtype)
        b = torch.cat([torch.tensor([-2, -1, 0, 1, 2, 3, 63, 0, 62, 40, -3, -4, -1, -7]),
                       torch.randint(0, 70, (50,), generator=g)]).to(dtype)
        out = torch.empty_like(a)
        k[(1,)](a, b, out, 0, a.numel(), SCALAR=False, BLOCK=64)
        assert torch.equal(out, torch.pow(a, b)), (dtype, out, torch.pow(a, b))
        k[(1,)](a, b, out, 5, a.numel(), SCALAR=True, BLOCK=64)
        assert torch.equal(out, torch.pow(a, 5)), (dtype, out)
        print("ok integer pow", dtype)


def check_recurrent_cells():
    """The LSTM/GRU step ops' CUDA kernels (_ops_rnn, one launch each) against the CPU's native step ops:
    float32 and float64, with and without the cell state's gradient, odd sizes (rows * hidden not a block)."""
    ops = ember.ops
    g = torch.Generator().manual_seed(5)

    def r(*shape, dtype):
        return ember.from_numpy((torch.randn(shape, generator=g, dtype=torch.float64) * 2).numpy()).to(dtype)

    for dtype, tol in ((ember.float32, 1e-6), (ember.float64, 1e-13)):
        for rows, h in ((3, 5), (7, 160)):
            xg, hg, cp = r(rows, 4 * h, dtype=dtype), r(rows, 4 * h, dtype=dtype), r(rows, h, dtype=dtype)
            dh, dc = r(rows, h, dtype=dtype), r(rows, h, dtype=dtype)
            cases = [(orn.lstm_cell, "_lstm_cell_fused", (xg, hg, cp))]
            acts, _, tanh_c, _ = ops["_lstm_cell_fused"](xg, hg, cp)
            cases += [(orn.lstm_cell_backward, "_lstm_cell_fused_backward", (dh, dc, acts, cp, tanh_c)),
                      (orn.lstm_cell_backward, "_lstm_cell_fused_backward", (dh, None, acts, cp, tanh_c))]
            xg3, hg3 = r(rows, 3 * h, dtype=dtype), r(rows, 3 * h, dtype=dtype)
            cases.append((orn.gru_cell, "_gru_cell_fused", (xg3, hg3, dh)))
            rzn = ops["_gru_cell_fused"](xg3, hg3, dh)[1]
            cases.append((orn.gru_cell_backward, "_gru_cell_fused_backward", (dc, rzn, hg3, dh)))
            for fn, name, args in cases:
                _CELL_LAUNCHES.clear()
                got, want = fn(*args), ops[name](*args)
                assert len(_CELL_LAUNCHES) == 1, _CELL_LAUNCHES
                assert len(got) == len(want)
                for a, b in zip(got, want):
                    assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape), (name, a.shape, b.shape)
                    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol, err_msg=name)
        print("ok recurrent cells", dtype)
    try:
        orn.lstm_cell(r(2, 8, dtype=ember.float32), r(2, 8, dtype=ember.float32), r(2, 3, dtype=ember.float32))
    except RuntimeError as e:
        assert "c_prev: expected shape [2, 2]" in str(e), e
    else:
        raise AssertionError("no error for a c_prev of the wrong width")


def check_recurrent_layers():
    """_lstm_layer / _gru_layer and their backward on CUDA (_ops_rnn: cuBLAS products and the cell kernels, here
    CPU matmuls and the interpreter) against the CPU's C++ layer ops: unpacked and packed steps, forward and
    reversed, LSTM with and without a projection, GRU with and without b_hh, some output gradients absent."""
    from ember._src.dispatch import OPS

    g = torch.Generator().manual_seed(11)

    def r(*shape, dtype):
        return ember.from_numpy(torch.randn(shape, generator=g, dtype=torch.float64).numpy()).to(dtype)

    cpu = {name: OPS[name].kernels["cpu"] for name in ("_lstm_layer", "_lstm_layer_backward", "_gru_layer",
                                                         "_gru_layer_backward")}
    for dtype, tol in ((ember.float32, 2e-5), (ember.float64, 1e-12)):
        for sizes, reverse in (([], False), ([], True), ([3, 3, 2, 1], False), ([3, 3, 2, 1], True)):
            batch, hidden, proj = 3, 4, 2
            rows = sum(sizes) if sizes else 5 * batch
            for w_hr in (None, r(proj, hidden, dtype=dtype)):
                p = proj if w_hr is not None else hidden
                args = (r(rows, 4 * hidden, dtype=dtype), r(batch, p, dtype=dtype), r(batch, hidden, dtype=dtype),
                        r(4 * hidden, p, dtype=dtype), w_hr, sizes, reverse)
                got, want = orn.lstm_layer(*args), cpu["_lstm_layer"](*args)
                _same(got, want, tol, "lstm")
                out, _, _, acts, cs, tanh_cs, ms = want
                for grads in ((r(rows, p, dtype=dtype), r(batch, p, dtype=dtype), r(batch, hidden, dtype=dtype)),
                              (r(rows, p, dtype=dtype), None, None), (None, r(batch, p, dtype=dtype), None)):
                    bargs = (*grads, acts, cs, tanh_cs, ms, out, args[1], args[2], args[3], w_hr, sizes, reverse)
                    _same(orn.lstm_layer_backward(*bargs), cpu["_lstm_layer_backward"](*bargs), tol, "lstm bwd")
            for b_hh in (None, r(3 * hidden, dtype=dtype)):
                args = (r(rows, 3 * hidden, dtype=dtype), r(batch, hidden, dtype=dtype),
                        r(3 * hidden, hidden, dtype=dtype), b_hh, sizes, reverse)
                got, want = orn.gru_layer(*args), cpu["_gru_layer"](*args)
                _same(got, want, tol, "gru")
                out, _, rzn, ghn = want
                for grads in ((r(rows, hidden, dtype=dtype), r(batch, hidden, dtype=dtype)),
                              (None, r(batch, hidden, dtype=dtype)), (r(rows, hidden, dtype=dtype), None)):
                    bargs = (*grads, rzn, ghn, out, args[1], args[2], b_hh is not None, sizes, reverse)
                    _same(orn.gru_layer_backward(*bargs), cpu["_gru_layer_backward"](*bargs), tol, "gru bwd")
        print("ok recurrent layers", dtype)


def _same(got, want, tol, name):
    assert len(got) == len(want), name
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape), (name, i, a.shape, b.shape)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol, err_msg=f"{name} output {i}")


if __name__ == "__main__":
    check_integer_pow()
    check_convolutions()
    check_depthwise_float64()
    check_recurrent_cells()
    check_recurrent_layers()
