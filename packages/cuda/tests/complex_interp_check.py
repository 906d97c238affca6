"""Runs ember's generated complex elementwise kernels (``_elementwise._source`` over ``_exprs``' "c" entries:
complex64/complex128 as interleaved (real, imag) pairs) in Triton's CPU interpreter against PyTorch's complex
kernels on the CPU: every binary and unary complex expression, real operands promoted to complex, complex
scalars (two kernel arguments), strided and broadcast operands (the offsets doubled into the parts), the copies
between complex and real/bool dtypes, where, fill, add_scaled, complex() and polar() (``python
complex_interp_check.py``; test_cuda_complex.py starts it in a fresh process, since TRITON_INTERPRET must be set
before Triton decorates the kernels). Prints one "ok" line per case."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import sys  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton.language as tl  # noqa: E402
import triton.runtime.interpreter as interp  # noqa: E402
from fused_interp_check import _load  # noqa: E402

from ember._cuda import _elementwise as ew  # noqa: E402
from ember._cuda import _exprs  # noqa: E402
from ember._src import dtypes as dt  # noqa: E402

_E = {torch.complex64: dt.complex64, torch.complex128: dt.complex128, torch.float32: dt.float32,
      torch.float64: dt.float64, torch.bool: dt.bool}
_N = 0


def _numpy_fn(fn):
    """A libdevice function for the interpreter (which has none: extern calls are compiled code), computed
    by NumPy on the interpreted tensors' arrays in their dtype."""

    def call(*args):
        first = next(a for a in args if isinstance(a, tl.core.tensor))
        data = [a.handle.data if isinstance(a, tl.core.tensor) else a for a in args]
        out = np.asarray(fn(*data)).astype(first.handle.data.dtype)
        return tl.core.tensor(interp.TensorHandle(out, first.handle.dtype.scalar), first.type)

    return call


# the libdevice functions the complex helpers call (each correctly rounded or within an ulp, as CUDA's)
_LIBDEVICE = SimpleNamespace(**{name: _numpy_fn(fn) for name, fn in (
    ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("sin", np.sin), ("cos", np.cos), ("sinh", np.sinh),
    ("cosh", np.cosh), ("hypot", np.hypot), ("atan2", np.arctan2), ("copysign", np.copysign),
    ("div_rn", np.divide), ("signbit", np.signbit))})


def _run(expr, out, operands, computes, shape=None, strides=None):
    """``expr`` over ``operands`` (torch tensors, contiguous unless ``strides`` gives (out's, each tensor
    operand's) strides in elements over the 2-d ``shape``, or Python numbers) into ``out``, through the
    generated kernel."""
    global _N
    spec = tuple(("s", _E[c]) if not isinstance(op, torch.Tensor) else ("t", _E[op.dtype], _E[c])
                 for op, c in zip(operands, computes))
    ntensors = 1 + sum(isinstance(op, torch.Tensor) for op in operands)
    linear = (True,) * ntensors if strides is None else (False,) * ntensors
    src, _ = ew._source(expr, spec, _E[out.dtype], 1 if shape is None else 2, linear, False)
    _N += 1
    k = _load(src, f"ember_complex_interp_{_N}")
    sys.modules[f"ember_complex_interp_{_N}"].libdevice = _LIBDEVICE

    def arg(t):
        return torch.view_as_real(t) if t.is_complex() else t

    args = [arg(out)]
    for op, c in zip(operands, computes):
        if isinstance(op, torch.Tensor):
            args.append(arg(op))
        elif c.is_complex:
            args += [complex(op).real, complex(op).imag]
        else:
            args.append(op)
    n = out.numel() if shape is None else shape[0] * shape[1]
    args.append(n)
    if strides is not None:
        args.append(shape[1])  # S1
        for st in strides:
            args.extend(st)
    k[(1,)](*args, BLOCK=256)
    return out


def _values(dtype, n, g, zeros=True):
    z = torch.complex(torch.randn(n, generator=g, dtype=torch.float64) * 2,
                      torch.randn(n, generator=g, dtype=torch.float64) * 2)
    if zeros:
        z[:6] = torch.tensor([0, 1j, -1, -2.5, 3 - 0j, -0.5j], dtype=torch.complex128)
    return z.to(dtype)


def _close(got, want, what, dtype=torch.complex64):
    tol = 2e-5 if dtype in (torch.complex64, torch.float32) else 1e-11
    if want.dtype == torch.bool:
        assert torch.equal(got, want), (what, got, want)
    else:
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True, msg=lambda m: f"{what}: {m}")


_ADDC_REF = {"COMPLEX_ADDCMUL": torch.addcmul, "COMPLEX_ADDCDIV": torch.addcdiv}
_BINARY_REF = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
               "eq": torch.eq, "ne": torch.ne}
_UNARY_REF = {"neg": torch.neg, "conj_physical": torch.conj_physical, "abs": torch.abs, "angle": torch.angle,
              "sgn": torch.sgn, "square": torch.square, "reciprocal": torch.reciprocal, "exp": torch.exp,
              "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log, "log2": torch.log2, "log10": torch.log10,
              "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos,
              "tan": torch.tan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh,
              "sigmoid": torch.sigmoid, "isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite,
              "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "asinh": torch.asinh, "acosh": torch.acosh,
              "atanh": torch.atanh}


def check_binary():
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.complex64, torch.complex128):
        a, b = _values(dtype, 200, g), _values(dtype, 200, g, zeros=False)
        b[7] = a[7]  # an equal pair for eq/ne
        for name, ref in _BINARY_REF.items():
            x = a.clone()
            if name == "pow":
                x[:6] = x[6:12]  # no zero base (0 ** negative: inf/NaN parts differ by formula)
            want = ref(x, b)
            out = torch.empty(want.shape, dtype=want.dtype)
            _run(_exprs.BINARY[name]["c"], out, [x, b], [dtype, dtype])
            _close(out, want, f"{name} {dtype}", dtype)
        print("ok complex binary", dtype)


def check_unary():
    g = torch.Generator().manual_seed(1)
    for dtype in (torch.complex64, torch.complex128):
        a = _values(dtype, 200, g)
        for name, ref in _UNARY_REF.items():
            x = a[6:] if name in ("reciprocal", "rsqrt", "log", "log2", "log10") else a  # no 1/0, log(0) parts
            want = ref(x)
            out = torch.empty(want.shape, dtype=want.dtype)
            _run(_exprs.UNARY[name]["c"], out, [x], [dtype])
            _close(out, want, f"{name} {dtype}", dtype)
        special = torch.tensor([complex("nan"), complex(float("inf"), 1), complex(1, float("-inf")), 1 + 1j])
        for name in ("isnan", "isinf", "isfinite"):
            out = torch.empty(4, dtype=torch.bool)
            _run(_exprs.UNARY[name]["c"], out, [special.to(dtype)], [dtype])
            _close(out, _UNARY_REF[name](special), name)
        print("ok complex unary", dtype)


def check_signed_zeros():
    """neg and conj give -0 for +0 (Triton's -x would give +0), and the branch cuts follow the zero's sign:
    asin/acos/atanh of 3 +- 0j, asinh of +-0 + 3j, as PyTorch's."""
    x = torch.tensor([0.0, -0.0, 1.5])
    out = torch.empty(3)
    _run(_exprs.UNARY["neg"]["f"], out, [x], [torch.float32])
    assert torch.equal(torch.signbit(out), torch.signbit(-x)), out
    z = torch.tensor([complex(3, 0.0), complex(3, -0.0), complex(-2, 0.0), complex(-2, -0.0), complex(0.0, 3),
                      complex(-0.0, 3), complex(0.0, -3), complex(-0.0, -3)], dtype=torch.complex128)
    for name in ("neg", "conj_physical", "asin", "acos", "atanh", "asinh", "acosh", "atan", "sqrt", "log"):
        out = torch.empty(8, dtype=torch.complex128)
        _run(_exprs.UNARY[name]["c"], out, [z], [torch.complex128])
        want = _UNARY_REF[name](z)
        _close(out, want, f"{name} on the cuts", torch.complex128)
        got_sign, want_sign = torch.signbit(torch.view_as_real(out)), torch.signbit(torch.view_as_real(want))
        assert torch.equal(got_sign, want_sign), (name, out, want)
    print("ok complex signed zeros and branch cuts")


def check_division_by_zero():
    """C99's infinities for a zero divisor (torch's std::complex division), NaN for 0 / 0."""
    a = torch.tensor([1 + 0j, 1 + 1j, -2 + 3j, 0j], dtype=torch.complex128)
    out = torch.empty(4, dtype=torch.complex128)
    _run(_exprs.BINARY["div"]["c"], out, [a, torch.zeros(4, dtype=torch.complex128)], [torch.complex128] * 2)
    want = a / torch.zeros(4, dtype=torch.complex128)
    got_inf, want_inf = torch.view_as_real(out).isinf(), torch.view_as_real(want).isinf()
    assert torch.equal(got_inf, want_inf), (out, want)
    assert torch.equal(torch.view_as_real(out).isnan(), torch.view_as_real(want).isnan()), (out, want)
    print("ok complex division by zero")


def check_mixed_and_scalars():
    """A real tensor operand computed in complex (zero imaginary parts); complex Python numbers."""
    g = torch.Generator().manual_seed(2)
    a = _values(torch.complex64, 100, g)
    r = torch.randn(100, generator=g)
    out = torch.empty(100, dtype=torch.complex64)
    _run(_exprs.BINARY["mul"]["c"], out, [a, r], [torch.complex64] * 2)
    _close(out, a * r, "complex * real tensor")
    _run(_exprs.BINARY["div"]["c"], out, [r, a[6:].repeat(2)[:100]], [torch.complex64] * 2)
    _close(out, r / a[6:].repeat(2)[:100], "real tensor / complex")
    _run(_exprs.BINARY["sub"]["c"], out, [a, 2.5 - 1.5j], [torch.complex64] * 2)
    _close(out, a - (2.5 - 1.5j), "complex - complex scalar")
    _run(_exprs.BINARY["mul"]["c"], out, [r, 1j], [torch.complex64] * 2)
    _close(out, r * 1j, "real tensor * 1j")
    _run(_exprs.BINARY["pow"]["c"], out, [a[6:].repeat(2)[:100], 2], [torch.complex64] * 2)
    _close(out, a[6:].repeat(2)[:100] ** 2, "complex ** 2")
    _run(_exprs.COMPLEX_ADD_SCALED, out, [a, r, 0.5 + 2j], [torch.complex64] * 3)
    _close(out, torch.add(a, r, alpha=0.5 + 2j), "add_scaled alpha complex")
    for name, ref in _ADDC_REF.items():
        _run(getattr(_exprs, name), out, [a, r, a[6:].repeat(2)[:100], 0.5 - 1j], [torch.complex64] * 4)
        _close(out, ref(a, r, a[6:].repeat(2)[:100], value=0.5 - 1j), name)
    _run(_exprs.COMPLEX_FILL, out, [3 - 4j], [torch.complex64])
    _close(out, torch.full((100,), 3 - 4j), "fill")
    print("ok complex mixed operands and scalars")


def check_strided_broadcast():
    """2-d decomposed offsets: a transposed operand, a broadcast row, a strided output; each offset is the
    element's, doubled into the parts."""
    g = torch.Generator().manual_seed(3)
    base = _values(torch.complex128, 20, g).reshape(4, 5)  # read as its transpose (5, 4), strides (1, 5)
    row = _values(torch.complex128, 4, g, zeros=False)  # broadcast over rows: strides (0, 1)
    wide = torch.zeros(5, 8, dtype=torch.complex128)  # out: every other column, strides (8, 2)
    _run(_exprs.BINARY["mul"]["c"], wide, [base, row], [torch.complex128] * 2, shape=(5, 4),
         strides=[(8, 2), (1, 5), (0, 1)])
    # the kernel wrote out[i, 2j] for the (5, 4) result: compare those, and the untouched columns stay zero
    want = base.T * row
    _close(wide[:, 0::2][:, :4], want, "strided mul", torch.complex128)
    assert torch.equal(wide[:, 1::2], torch.zeros(5, 4, dtype=torch.complex128))
    print("ok complex strided and broadcast operands")


def check_copies():
    g = torch.Generator().manual_seed(4)
    a = _values(torch.complex128, 64, g)
    r = torch.randn(64, generator=g)
    out = torch.empty(64, dtype=torch.complex64)
    _run(_exprs.COMPLEX_COPY, out, [a], [torch.complex64])
    _close(out, a.to(torch.complex64), "complex128 -> complex64")
    _run(_exprs.COMPLEX_COPY, out, [r], [torch.complex64])
    _close(out, r.to(torch.complex64), "float32 -> complex64")
    re = torch.empty(64, dtype=torch.float32)
    _run("{0}", re, [a], [torch.float64])
    _close(re, a.real.to(torch.float32), "complex128 -> float32 (the real part)")
    b = torch.empty(64, dtype=torch.bool)
    z = a.clone()
    z[:3] = torch.tensor([0j, 1j, 2 + 0j])
    _run(_exprs.COMPLEX_TO_BOOL, b, [z], [torch.complex128])
    _close(b, z.to(torch.bool), "complex -> bool")
    print("ok complex copies")


def check_where_and_parts():
    g = torch.Generator().manual_seed(5)
    a, b = _values(torch.complex64, 50, g), _values(torch.complex64, 50, g)
    cond = torch.rand(50, generator=g) > 0.5
    out = torch.empty(50, dtype=torch.complex64)
    _run(_exprs.COMPLEX_WHERE, out, [cond, a, b], [torch.bool, torch.complex64, torch.complex64])
    _close(out, torch.where(cond, a, b), "where")
    _run(_exprs.COMPLEX_MASKED_FILL, out, [a, cond, 1 - 1j], [torch.complex64, torch.bool, torch.complex64])
    _close(out, a.masked_fill(cond, 1 - 1j), "masked_fill")
    for dtype in (torch.float32, torch.float64):
        x, y = torch.randn(50, generator=g, dtype=dtype), torch.randn(50, generator=g, dtype=dtype)
        cd = torch.complex64 if dtype == torch.float32 else torch.complex128
        out = torch.empty(50, dtype=cd)
        _run(_exprs.COMPLEX_FROM_PARTS, out, [x, y], [dtype, dtype])
        _close(out, torch.complex(x, y), f"complex() {dtype}", cd)
        _run(_exprs.COMPLEX_POLAR, out, [x.abs(), y], [dtype, dtype])
        _close(out, torch.polar(x.abs(), y), f"polar() {dtype}", cd)
    print("ok complex where, masked_fill, complex(), polar()")


if __name__ == "__main__":
    check_binary()
    check_unary()
    check_signed_zeros()
    check_division_by_zero()
    check_mixed_and_scalars()
    check_strided_broadcast()
    check_copies()
    check_where_and_parts()
