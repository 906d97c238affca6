"""Generated Triton kernels for elementwise work: one source per (expression, operand kinds, rank).

``launch(expr, out, operands)`` writes ``expr`` evaluated over broadcast ``operands`` into
``out`` (any strides). Each operand is a tensor (loaded in its dtype, then cast to the dtype the
expression computes in) or a Python number (a kernel argument of that compute dtype). Dims
are collapsed first (size-1 dims dropped, neighbours merged where every operand is contiguous
across them), so contiguous same-shape operands index with the linear offset alone and
strided/broadcast ones decompose it into at most the collapsed rank. Offsets are 32-bit
unless some extent needs 64.

Complex tensors (complex64/complex128: Triton has no complex type) are read and written as
interleaved (real, imag) pairs of their parts' float dtype: an operand computed in a complex
dtype loads ``x{i}`` (real part) and ``x{i}_i`` (imaginary part; zeros for a real operand), a
complex Python number is passed as two scalar arguments, and the expression (``_exprs``' "c"
entries, which name the parts ``{0.r}``/``{0.i}``) evaluates to a (real, imag) pair when the
result is complex, to one value otherwise (abs, angle, comparisons). A complex operand
computed in a real dtype loads its real part (a cast to a real dtype, as PyTorch's).
"""

from __future__ import annotations

from ember._src import dtypes as dt

from . import _compile
from ._exprs import PRELUDE
from ._streams import current_handle

TRITON = {
    dt.float16: "fp16", dt.bfloat16: "bf16", dt.float32: "fp32", dt.float64: "fp64", dt.int8: "i8",
    dt.uint8: "u8", dt.int16: "i16", dt.int32: "i32", dt.int64: "i64", dt.bool: "i1",
}
TL = {
    dt.float16: "tl.float16", dt.bfloat16: "tl.bfloat16", dt.float32: "tl.float32", dt.float64: "tl.float64",
    dt.int8: "tl.int8", dt.uint8: "tl.uint8", dt.int16: "tl.int16", dt.int32: "tl.int32", dt.int64: "tl.int64",
    dt.bool: "tl.int1",
}
PARTS = {dt.complex64: dt.float32, dt.complex128: dt.float64}  # a complex dtype -> its parts' dtype
HEADER = "import triton\nimport triton.language as tl\nfrom triton.language.extra import libdevice\n\n" + PRELUDE
_INT31 = (1 << 31) - 1
_NUMBERS = (int, float, bool, complex)


def scalar_arg_type(compute) -> str:
    """The kernel-argument type a Python number is passed as, computing in ``compute`` (each part of
    a complex number: its parts' type)."""
    compute = PARTS.get(compute, compute)
    if compute is dt.float64:
        return "fp64"
    if compute.is_floating_point:
        return "fp32"
    return "i64"  # an integer, or a bool passed as 0/1 and cast to int1 in the kernel


def _scalar_value(value, compute):
    if compute.is_floating_point:
        return float(value)
    return int(value)


def _add_scalar(args: list, value, compute) -> None:
    """Appends a Python number's kernel argument(s): two (real, imag) for a complex compute dtype."""
    if compute in PARTS:
        value = complex(value)
        args.append(value.real)
        args.append(value.imag)
    else:
        args.append(_scalar_value(value, compute))


class _Operand(str):
    """An operand's name in an expression; ``.r``/``.i`` name a complex operand's parts."""

    @property
    def r(self):
        return str(self)

    @property
    def i(self):
        return str(self) + "_i"


def _any_complex(out, operands) -> bool:
    return out.dtype in PARTS or any(not isinstance(op, _NUMBERS) and op.dtype in PARTS for op in operands)


def collapse(shape: tuple, strides: list) -> tuple:
    """Drops size-1 dims and merges neighbours contiguous in every operand. Returns (shape, strides)."""
    dims = [d for d, s in enumerate(shape) if s != 1]
    if not dims:
        return (1,), [(0,) for _ in strides]
    out_shape = [shape[dims[0]]]
    out_strides = [[st[dims[0]]] for st in strides]
    for d in dims[1:]:
        size = shape[d]
        if all(cur[-1] == st[d] * size for cur, st in zip(out_strides, strides)):
            out_shape[-1] *= size
            for cur, st in zip(out_strides, strides):
                cur[-1] = st[d]
        else:
            out_shape.append(size)
            for cur, st in zip(out_strides, strides):
                cur.append(st[d])
    return tuple(out_shape), [tuple(s) for s in out_strides]


def _broadcast_strides(t, ndim: int, shape: tuple) -> tuple:
    lead = ndim - t.ndim
    strides = [0] * lead
    for d, (size, st) in enumerate(zip(t._shape, t._stride)):
        strides.append(0 if size == 1 and shape[lead + d] != 1 else st)
    return tuple(strides)


def _source(expr: str, spec: tuple, out_dtype, ndim: int, linear: tuple, idx64: bool) -> tuple:
    """(source, signature) of the kernel; ``spec`` is per operand ("t", load, compute) or ("s", compute)."""
    args = ["p_out"]
    sig = {"p_out": "*" + TRITON[PARTS.get(out_dtype, out_dtype)]}
    for i, s in enumerate(spec):
        if s[0] == "t":
            args.append(f"p{i}")
            sig[f"p{i}"] = "*" + TRITON[PARTS.get(s[1], s[1])]
        else:
            args.append(f"s{i}")
            sig[f"s{i}"] = scalar_arg_type(s[1])
            if s[1] in PARTS:
                args.append(f"s{i}_i")
                sig[f"s{i}_i"] = scalar_arg_type(s[1])
    args.append("n")
    sig["n"] = "i64" if idx64 else "i32"
    itype = "i64" if idx64 else "i32"
    tensors = ["out"] + [f"{i}" for i, s in enumerate(spec) if s[0] == "t"]
    for d in range(1, ndim):
        args.append(f"S{d}")
        sig[f"S{d}"] = itype
    for j, name in enumerate(tensors):
        if not linear[j]:
            for d in range(ndim):
                args.append(f"st{name}_{d}")
                sig[f"st{name}_{d}"] = itype
    args.append("BLOCK")
    sig["BLOCK"] = "constexpr"
    lines = ["@triton.jit", f"def k({', '.join(args[:-1])}, BLOCK: tl.constexpr):"]
    pid = "tl.program_id(0).to(tl.int64)" if idx64 else "tl.program_id(0)"
    lines.append(f"    offs = {pid} * BLOCK + tl.arange(0, BLOCK)")
    lines.append("    mask = offs < n")
    if not all(linear) and ndim > 1:
        lines.append("    rem = offs")
        for d in range(ndim - 1, 0, -1):
            lines.append(f"    i{d} = rem % S{d}")
            lines.append(f"    rem = rem // S{d}")
        lines.append("    i0 = rem")
    elif not all(linear):
        lines.append("    i0 = offs")

    def offset(j, name):
        if linear[j]:
            return "offs"
        return " + ".join(f"i{d} * st{name}_{d}" for d in range(ndim))

    t = 1
    for i, s in enumerate(spec):
        if s[0] == "t":
            off = offset(t, str(i))
            ct = TL[PARTS.get(s[2], s[2])]
            if s[1] in PARTS:  # interleaved (real, imag) pairs
                lines.append(f"    x{i} = tl.load(p{i} + 2 * ({off}), mask=mask).to({ct})")
                if s[2] in PARTS:
                    lines.append(f"    x{i}_i = tl.load(p{i} + 2 * ({off}) + 1, mask=mask).to({ct})")
            else:
                lines.append(f"    x{i} = tl.load(p{i} + ({off}), mask=mask).to({ct})")
                if s[2] in PARTS:
                    lines.append(f"    x{i}_i = tl.zeros_like(x{i})")
            t += 1
        elif s[1] is dt.bool:
            lines.append(f"    x{i} = s{i} != 0")
        else:
            lines.append(f"    x{i} = s{i}")
            if s[1] in PARTS:
                lines.append(f"    x{i}_i = s{i}_i")
    names = [_Operand(f"x{i}") for i in range(len(spec))]
    if out_dtype in PARTS:
        ot = TL[PARTS[out_dtype]]
        lines.append(f"    r, r_i = {expr.format(*names)}")
        lines.append(f"    tl.store(p_out + 2 * ({offset(0, 'out')}), r.to({ot}), mask=mask)")
        lines.append(f"    tl.store(p_out + 2 * ({offset(0, 'out')}) + 1, r_i.to({ot}), mask=mask)")
    else:
        lines.append(f"    r = {expr.format(*names)}")
        lines.append(f"    tl.store(p_out + ({offset(0, 'out')}), r.to({TL[out_dtype]}), mask=mask)")
    return HEADER + "\n".join(lines) + "\n", sig


_PLANS: dict = {}
BIG = 1 << 20  # elements past which the large-block configuration is used
CONFIGS = {False: (1024, 4), True: (2048, 8)}  # big? -> (BLOCK, num_warps)


def _plan(expr, spec, out_dtype, ndim, linear, idx64, aligned, big, index):
    """(launcher, BLOCK) of the kernel for this operand class, compiled on first use."""
    block, warps = CONFIGS[big]
    key = (expr, spec, out_dtype, ndim, linear, idx64, aligned, block, warps, index)
    entry = _PLANS.get(key)
    if entry is None:
        source, sig = _source(expr, spec, out_dtype, ndim, linear, idx64)
        al = tuple(a for a in sig if a.startswith("p") or a == "n") if aligned else ()
        entry = _PLANS[key] = (_compile.kernel(source, "k", sig, {"BLOCK": block}, al, warps, 1, index), block)
    return entry


# -- the small-op fast path ------------------------------------------------------------------------
# Contiguous operands of one shape need no collapsing, broadcasting or extent checks: an op's
# kernel caches (result dtype, expression, operand spec) per input dtype class and comes here.

_SHAPES: dict = {}
_FAST: dict = {}


def contiguous_info(shape: tuple) -> tuple:
    """(contiguous strides, numel) of ``shape``, cached."""
    info = _SHAPES.get(shape)
    if info is None:
        n = 1
        for s in shape:
            n *= s
        strides = [1] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            strides[d] = strides[d + 1] * shape[d + 1]
        info = (tuple(strides), n)
        if len(_SHAPES) < 4096:
            _SHAPES[shape] = info
    return info


def linear_plan(expr: str, spec: tuple, out_dtype, aligned: bool, n: int, device) -> tuple:
    """(launcher, BLOCK) for contiguous operands of one shape (callers cache it per operand class)."""
    ntensors = 1 + sum(1 for s in spec if s[0] == "t")
    return _plan(expr, spec, out_dtype, 1, (True,) * ntensors, False, aligned, n > BIG, device.index or 0)


def launch_linear(expr: str, spec: tuple, out, out_ptr: int, args: list, n: int, aligned: bool) -> None:
    """``out`` and every tensor operand contiguous of one shape (n elements, 0 < n < 2**31); ``args`` are
    the operands' data pointers and (already converted) scalar values, in order."""
    index = out._device.index or 0
    key = (expr, spec, out.dtype, aligned, n > BIG, index)
    entry = _FAST.get(key)
    if entry is None:
        ntensors = 1 + sum(1 for s in spec if s[0] == "t")
        entry = _FAST[key] = _plan(expr, spec, out.dtype, 1, (True,) * ntensors, False, aligned, n > BIG, index)
    launcher, block = entry
    launcher(((n + block - 1) // block, 1, 1), current_handle(index), out_ptr, *args, n)


def _launch_contiguous(expr, out, operands, computes, shape, strides, n) -> bool:
    """The common case of ``launch``: every tensor operand contiguous with out's shape. False otherwise."""
    out_ptr = out._storage._ptr + out._offset * out.dtype.itemsize
    bits = out_ptr | n
    args, spec = [], []
    for op, c in zip(operands, computes):
        if isinstance(op, _NUMBERS):
            _add_scalar(args, op, c)
            spec.append(("s", c))
        else:
            if op._shape != shape or op._stride != strides:
                return False
            p = op._storage._ptr + op._offset * op.dtype.itemsize
            bits |= p
            args.append(p)
            spec.append(("t", op.dtype, c))
    spec = tuple(spec)
    index = out._device.index or 0
    ntensors = 1 + sum(1 for s in spec if s[0] == "t")
    launcher, block = _plan(expr, spec, out.dtype, 1, (True,) * ntensors, False, not bits & 15, n > BIG, index)
    launcher(((n + block - 1) // block, 1, 1), current_handle(index), out_ptr, *args, n)
    return True


# (expr, out dtype, shape and strides, each operand's (shape, strides, dtype, compute) or ("s", compute)) ->
# the launch geometry ``launch`` derives from them: a training step meets the same few hundred again and
# again, and deriving it (broadcast, collapse, extent) costs more than the launch itself.
_GEOMETRY: dict = {}


def _geometry(out, operands, computes, shape, n) -> tuple:
    """(spec, ndim, linear, idx64, tail arguments, all linear) of a general launch."""
    tensors = [out] + [op for op in operands if not isinstance(op, _NUMBERS)]
    if all(t._shape == shape for t in tensors) and all(t._stride == out._stride for t in tensors) and \
            out.is_contiguous():
        cshape, cstrides = (n,), [(1,)] * len(tensors)
    else:
        ndim = len(shape)
        cshape, cstrides = collapse(shape, [_broadcast_strides(t, ndim, shape) for t in tensors])
    ndim = len(cshape)
    contiguous = [1] * ndim
    for d in range(ndim - 2, -1, -1):
        contiguous[d] = contiguous[d + 1] * cshape[d + 1]
    contiguous = tuple(contiguous)
    linear = tuple(st == contiguous for st in cstrides)
    extent = max([n] + [sum((s - 1) * abs(st) for s, st in zip(cshape, sts)) + 1 for sts in cstrides])
    if any(t.dtype in PARTS for t in tensors):
        extent *= 2  # complex offsets index the parts: twice the elements' offsets
    spec = tuple(("s", c) if isinstance(op, _NUMBERS) else ("t", op.dtype, c) for op, c in zip(operands, computes))
    tail = list(cshape[1:])
    for j, sts in enumerate(cstrides):
        if not linear[j]:
            tail.extend(sts)
    return spec, ndim, linear, extent > _INT31, tuple(tail), all(linear)


def launch(expr: str, out, operands: list, computes: list) -> None:
    """Writes ``expr`` over ``operands`` (tensors or numbers; each computed in ``computes[i]``) into
    ``out``, broadcasting every tensor operand to ``out``'s shape."""
    shape = out._shape
    strides, n = _SHAPES.get(shape) or contiguous_info(shape)
    if n == 0:
        return
    if out._stride == strides and (n <= _INT31 >> 1 or (n <= _INT31 and not _any_complex(out, operands))) and \
            _launch_contiguous(expr, out, operands, computes, shape, strides, n):
        return
    key = (expr, out.dtype, shape, out._stride,
           tuple(("s", c) if isinstance(op, _NUMBERS) else (op._shape, op._stride, op.dtype, c)
                 for op, c in zip(operands, computes)))
    geometry = _GEOMETRY.get(key)
    if geometry is None:
        geometry = _geometry(out, operands, computes, shape, n)
        if len(_GEOMETRY) < 8192:
            _GEOMETRY[key] = geometry
    spec, ndim, linear, idx64, tail, all_linear = geometry
    ptrs = [out.data_ptr()] + [op.data_ptr() for op in operands if not isinstance(op, _NUMBERS)]
    aligned = all_linear and n % 16 == 0 and all(p % 16 == 0 for p in ptrs)
    index = out._device.index or 0
    plan, block = _plan(expr, spec, out.dtype, ndim, linear, idx64, aligned, n > BIG, index)
    args = [ptrs[0]]
    t = 1
    for op, c in zip(operands, computes):
        if isinstance(op, _NUMBERS):
            _add_scalar(args, op, c)
        else:
            args.append(ptrs[t])
            t += 1
    args.append(n)
    args.extend(tail)
    plan(((n + block - 1) // block, 1, 1), current_handle(index), *args)
