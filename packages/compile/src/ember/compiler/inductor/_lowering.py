"""Lowerings: one row per ember op, turning op calls on lazy values into loop-level IR.

``LOWERINGS[name](ctx, *args, **kwargs)`` returns a ``TensorValue`` (or a tuple of them) for
an op whose arguments are ``TensorValue``s and Python values. A lowering raises
``Unsupported`` for a case it does not cover (an integer division, a dtype it cannot compute);
the graph lowering then runs that call with ember's eager kernel instead (never a wrong answer).
"""

from __future__ import annotations

import sympy

from ember._src import dtypes as dt
from ember._src.device import META, to_device
from ember._src.tensor import new_empty_tensor

from ._ir import (
    HALF_TYPES,
    Call,
    Const,
    IndexValue,
    Load,
    TensorValue,
    cast,
    compute_dtype,
    sym,
)

LOWERINGS: dict = {}


class Unsupported(Exception):
    """This call is not lowered; run it eagerly."""


def register(*names):
    def wrap(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn

    return wrap


# -- helpers ----------------------------------------------------------------------------------

def _standin(x):
    """What ember's promotion rules need of an operand: dtype and 0-dim-ness, or the number."""
    if isinstance(x, TensorValue):
        return new_empty_tensor(() if x.ndim == 0 else (1,), x.dtype, META)
    if isinstance(x, sympy.Basic):
        return 2  # a symbolic int (a number input of the graph): an int operand
    return x


def result_type(*operands):
    return dt.result_type_of(*[_standin(x) for x in operands])


def broadcast_shape(*shapes) -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        size = sympy.Integer(1)
        for s in shapes:
            k = d - (ndim - len(s))
            if k < 0 or s[k] == 1:
                continue
            if size != 1 and size != s[k] and not (size - s[k]).free_symbols:
                raise RuntimeError(f"shapes {shapes} are not broadcastable")
            size = s[k]
        out.append(size)
    return tuple(out)


def _loader_for(ctx, x, shape, compute):
    """A loader of operand ``x`` broadcast to ``shape`` and cast to ``compute``."""
    if isinstance(x, sympy.Basic):
        # a symbolic int operand (``x * n``): the kernel reads it as an argument
        value = cast(IndexValue(x), compute)
        return lambda idx: value
    if not isinstance(x, TensorValue):
        const = Const(x, compute)
        return lambda idx: const
    x = ctx.use(x)
    offset = len(shape) - x.ndim

    def load(idx):
        sub = [sympy.Integer(0) if x.shape[k] == 1 else idx[k + offset] for k in range(x.ndim)]
        return cast(x.load(sub), compute)

    return load


def pointwise(ctx, operands, compute, result, fn, origin=""):
    """A lazy value computing ``fn(*loaded operands)`` in ``compute``, stored as ``result``."""
    shape = broadcast_shape(*[x.shape for x in operands if isinstance(x, TensorValue)])
    loaders = [_loader_for(ctx, x, shape, compute) for x in operands]

    def loader(idx):
        return fn(*[ld(idx) for ld in loaders])

    return TensorValue(shape, result, loader, origin=origin)


def _call(op, dtype):
    return lambda *args: Call(op, args, dtype)


# -- binary arithmetic ------------------------------------------------------------------------

_SAME = {"add", "sub", "mul", "maximum", "minimum", "fmax", "fmin", "bitwise_and", "bitwise_or",
         "bitwise_xor"}
_FLOAT = {"div", "atan2", "hypot", "copysign", "logaddexp", "logaddexp2"}
_BOOL = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"}
_FLOAT_ONLY = {"floor_divide", "remainder", "fmod", "pow", "fmax", "fmin", "hypot", "atan2", "copysign",
               "logaddexp", "logaddexp2", "nextafter"}
_INTEGRAL_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor"}


def _binary(name):
    def lower(ctx, a, b):
        promoted = result_type(a, b)
        if promoted.is_complex:
            raise Unsupported(f"{name} on complex")
        if name in _FLOAT_ONLY and not promoted.is_floating_point:
            raise Unsupported(f"{name} on {promoted}")  # eager's integer semantics (division by zero)
        if name in _INTEGRAL_ONLY and promoted.is_floating_point:
            raise Unsupported(f"{name} on {promoted}")
        if name == "sub" and promoted is dt.bool:
            raise Unsupported("sub on bool")  # eager raises; let it
        if name in _FLOAT and not promoted.is_floating_point:
            promoted = dt.get_default_dtype()
        result = dt.bool if name in _BOOL else promoted
        compute = compute_dtype(promoted)
        return pointwise(ctx, (a, b), compute, result, _call(name, compute_dtype(result)), name)

    return lower


for _n in sorted(_SAME | _FLOAT | _BOOL | {"floor_divide", "remainder", "fmod", "pow"}):
    register(_n)(_binary(_n))


@register("add_scaled")
def _add_scaled(ctx, a, b, alpha):
    promoted = result_type(a, b)
    compute = compute_dtype(promoted)
    if not promoted.is_floating_point and isinstance(alpha, float):
        raise Unsupported("float alpha on integers")
    k = Const(alpha, compute)
    return pointwise(ctx, (a, b), compute, promoted,
                     lambda x, y: Call("add", (x, Call("mul", (y, k), compute)), compute), "add_scaled")


# -- unary ------------------------------------------------------------------------------------

_UNARY_FLOAT = ("sqrt rsqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh "
                "asinh acosh atanh sigmoid erf erfc reciprocal gelu gelu_tanh silu mish hardsigmoid hardswish "
                "selu softsign tanhshrink softplus elu celu").split()
_UNARY_KEEP = "abs neg floor ceil trunc round square relu relu6 leaky_relu hardtanh threshold frac sign".split()
_UNARY_PREDICATE = "isnan isinf isfinite isposinf isneginf signbit logical_not".split()
_FLOAT_ONLY_UNARY = {"frac", "leaky_relu", "hardtanh", "threshold"}


def _unary(name, kind):
    def lower(ctx, x, *params):
        if not isinstance(x, TensorValue) or x.dtype.is_complex:
            raise Unsupported(name)
        if kind == "predicate":
            compute, result = compute_dtype(x.dtype), dt.bool
        elif kind == "float" and not x.dtype.is_floating_point:
            compute, result = compute_dtype(dt.get_default_dtype()), dt.get_default_dtype()
        else:
            compute, result = compute_dtype(x.dtype), x.dtype
        if x.dtype is dt.bool and kind != "predicate":
            raise Unsupported(f"{name} on bool")
        if name in _FLOAT_ONLY_UNARY and not compute.is_floating_point:
            raise Unsupported(f"{name} on {compute}")
        consts = tuple(Const(p, dt.float64 if compute is dt.float64 else dt.float32) for p in params)
        out = compute_dtype(result)
        return pointwise(ctx, (x,), compute, result, lambda v: Call(name, (v, *consts), out), name)

    return lower


for _n in _UNARY_FLOAT:
    register(_n)(_unary(_n, "float"))
for _n in _UNARY_KEEP:
    register(_n)(_unary(_n, "keep"))
for _n in _UNARY_PREDICATE:
    register(_n)(_unary(_n, "predicate"))


# -- ternary and friends ----------------------------------------------------------------------

@register("where")
def _where(ctx, cond, a, b):
    promoted = result_type(a, b)
    compute = compute_dtype(promoted)
    c_loader = cond if isinstance(cond, TensorValue) else bool(cond)
    def select(c, x, y):
        c = cast(c, dt.bool)
        if compute is dt.bool and isinstance(x, Const) and isinstance(y, Const) and x.value and not y.value:
            return c  # where(c, True, False)
        return Call("where", (c, x, y), compute)

    return pointwise(ctx, (c_loader, a, b), compute, promoted, select, "where")


@register("masked_fill")
def _masked_fill(ctx, x, mask, value):
    if x.dtype.is_complex:
        raise Unsupported("complex")
    compute = compute_dtype(x.dtype)
    return pointwise(ctx, (mask, x, value), compute, x.dtype,
                     lambda m, a, v: Call("where", (cast(m, dt.bool), v, a), compute), "masked_fill")


@register("clamp")
def _clamp(ctx, x, min=None, max=None):  # noqa: A002 - the schema's names
    if min is None and max is None:
        raise Unsupported("clamp without bounds")  # eager raises
    promoted = result_type(*[v for v in (x, min, max) if v is not None])
    if x.dtype is dt.bool or promoted.is_complex:
        raise Unsupported("clamp dtype")
    compute = compute_dtype(promoted)
    operands = [v for v in (x, min, max) if v is not None]

    def fn(v, *bounds):
        k = 0
        if min is not None:
            v = Call("clamp_min", (v, bounds[k]), compute)
            k += 1
        if max is not None:
            v = Call("clamp_max", (v, bounds[k]), compute)
        return v

    return pointwise(ctx, operands, compute, promoted, fn, "clamp")


@register("lerp")
def _lerp(ctx, start, end, weight):
    promoted = result_type(start, end)
    if not promoted.is_floating_point:
        raise Unsupported("lerp dtype")
    compute = compute_dtype(promoted)
    return pointwise(ctx, (start, end, weight), compute, promoted, _call("lerp", compute), "lerp")


def _addc(name, inner):
    def lower(ctx, x, t1, t2, value=1):
        promoted = result_type(x, t1, t2)
        if not promoted.is_floating_point:
            raise Unsupported(f"{name} on integers")
        compute = compute_dtype(promoted)
        k = Const(value, compute)

        def fn(a, b, c):
            return Call("add", (a, Call("mul", (k, Call(inner, (b, c), compute)), compute)), compute)

        return pointwise(ctx, (x, t1, t2), compute, promoted, fn, name)

    return lower


register("addcmul")(_addc("addcmul", "mul"))
register("addcdiv")(_addc("addcdiv", "div"))


_ROUND_TO = {dt.float16: "round_to_float16", dt.bfloat16: "round_to_bfloat16"}


@register("_to_copy")
def _to_copy(ctx, x, dtype=None, device=None, **ignored):
    if device is not None and to_device(device) != ctx.device:
        raise Unsupported("device copy")
    if ignored.get("memory_format") not in (None,):
        raise Unsupported("memory_format")
    target = dt.to_dtype(dtype) if dtype is not None else x.dtype
    if target.is_complex or x.dtype.is_complex:
        raise Unsupported("complex copy")
    x = ctx.use(x)
    compute = compute_dtype(target)
    # A cast rounds to half precision where it stands: a half value inside a fused chain is
    # computed in float32 and only rounded where stored, so both a cast to half (float32 ->
    # float16 -> float32 is not the identity) and a cast of a half value to another dtype (the
    # value eager's half tensor holds) round here. float64 goes through float32 (one more
    # rounding only where a double lies within float32's rounding error of a half tie).
    rounders = []
    if x.dtype in HALF_TYPES and target is not x.dtype:
        rounders.append(_ROUND_TO[x.dtype])
    if target in HALF_TYPES and target is not x.dtype and (x.dtype.is_floating_point or rounders):
        rounders.append(_ROUND_TO[target])

    def load(idx):
        v = x.load(idx)
        ops = rounders[1:] if isinstance(v, Load) and v.storage_dtype is x.dtype and x.dtype in HALF_TYPES \
            else rounders  # a half element loaded from memory is rounded already
        if ops:
            v = cast(v, dt.float32)
            for op in ops:
                v = Call(op, (v,), dt.float32)
        return cast(v, compute)  # float -> int truncates like C

    return TensorValue(x.shape, target, load, origin="to_copy")


@register("clone", "contiguous")
def _clone(ctx, x, memory_format=None):
    x = ctx.use(x)
    return TensorValue(x.shape, x.dtype, x.loader, origin="clone")


@register("copy_")
def _copy_(ctx, dst, src, non_blocking=False):
    return ctx.mutate(dst, src)


@register("cat")
def _cat(ctx, tensors, dim=0):
    """``cat`` as each piece stored into its slice of one fresh buffer, as the pieces' own
    kernels (fused where they share a shape): the pieces are not stored first and copied. GPT-2's
    q/k/v gradients, transposed back from attention's layout, were three copies of 12 MB a layer
    into the qkv gradient on top of the transposes' own kernel."""
    from ember._src.dispatch import OPS

    from ._ir import Buffer, ComputedBuffer

    if not isinstance(tensors, (list, tuple)) or len(tensors) < 2 \
            or not all(isinstance(t, TensorValue) for t in tensors):
        raise Unsupported("cat of fewer than two tensors")
    first = tensors[0]
    if first.ndim == 0 or any(t.dtype is not first.dtype or t.ndim != first.ndim for t in tensors):
        raise Unsupported("cat of mixed dtypes or ranks")  # (eager promotes; a 1-d empty piece is skipped)
    if not -first.ndim <= dim < first.ndim:
        raise Unsupported("dim out of range")
    dim %= first.ndim
    for t in tensors:
        for d in range(first.ndim):
            if d != dim and t.shape[d] != first.shape[d]:
                raise Unsupported("cat of mismatched shapes")
        if any(s.free_symbols for s in t.shape):
            raise Unsupported("cat of symbolic sizes")
    shape = list(first.shape)
    shape[dim] = sum((t.shape[dim] for t in tensors), sympy.Integer(0))
    out = ctx.extern(OPS["empty"], (tuple(int(s) for s in shape),), {"dtype": first.dtype, "device": ctx.device})
    whole = out.buffer
    compute = compute_dtype(first.dtype)
    offset = sympy.Integer(0)
    for t in tensors:
        if t.shape[dim] != 0:
            piece = Buffer(whole.name, t.shape, whole.dtype, strides=whole.strides,
                           offset=whole.offset + offset * whole.strides[dim])
            load = _loader_for(ctx, t, t.shape, compute)
            buf = ComputedBuffer(ctx.new_name(), t.shape, first.dtype, load, target=piece)
            buf.origins = [ctx.current]
            ctx.items.append(buf)
        offset = offset + t.shape[dim]
    return out


@register("fill_")
def _fill_(ctx, dst, value):
    const = Const(value, compute_dtype(dst.dtype))
    return ctx.mutate(dst, TensorValue(dst.shape, dst.dtype, lambda idx: const, origin="fill"))


def _mixes_with_graph_tensors(ctx) -> bool:
    """Whether every user of the node being lowered also takes another of the graph's values: a
    0-dim CPU number-tensor (``where(mask, x, 0)`` in a backward formula) then only ever meets
    device tensors, whose device the results take, so it can be a constant in the kernels."""
    node = next((n for n in ctx.gm.graph.nodes if n.name == ctx.current), None)
    if node is None or not node.users:
        return False
    return all(user.op == "call_function" and any(a is not node for a in user.all_input_nodes)
               for user in node.users)


def _on_graph_device(ctx, device) -> bool:
    """Whether a factory makes its tensor where the graph's kernels run. A decomposition runs on
    meta stand-ins of the graph's values, so its ``device=x.device`` reads meta: the graph's."""
    return to_device(device) in (ctx.device, META) if device is not None else to_device(device) == ctx.device


@register("full")
def _full(ctx, size, fill_value, dtype=None, device=None, **ignored):
    if not _on_graph_device(ctx, device) and not (len(size) == 0 and _mixes_with_graph_tensors(ctx)):
        raise Unsupported("device")  # made elsewhere than the graph's kernels run: eagerly
    d = dt.to_dtype(dtype) if dtype is not None else dt.scalar_dtype(fill_value)
    if isinstance(fill_value, bool):
        d = dt.bool if dtype is None else d
    if d.is_complex:
        raise Unsupported("complex fill")
    const = Const(fill_value, compute_dtype(d))
    return TensorValue([sym(s) for s in size], d, lambda idx: const, origin="full")


@register("arange_affine")
def _arange_affine(ctx, n, start, step, dtype=None, device=None, **ignored):
    """An integer range as index arithmetic (the iota a one-hot compare reads, never stored);
    float ranges stay eager (its kernel rounds ``start + i * step`` from float64 once)."""
    if not _on_graph_device(ctx, device):
        raise Unsupported("device")
    d = dt.to_dtype(dtype) if dtype is not None else dt.int64
    if d.is_floating_point or d.is_complex or d is dt.bool or not isinstance(start, int) \
            or not isinstance(step, int) or isinstance(start, bool):
        raise Unsupported("arange of this dtype")
    if d is not dt.int64 and d is not dt.int32:
        raise Unsupported("narrow integer range")  # wraps around as eager's copy does: leave it there
    return TensorValue([sym(n)], d, lambda idx: IndexValue(start + step * idx[0], d), origin="arange")
