"""CUDA kernels of the elementwise op families: binary, unary (plain and parameterized),
where, fill_, masked_fill_, add_scaled, addcmul/addcdiv, lerp, clamp_. Complex operands take
_exprs' "c" entries (interleaved (real, imag) pairs, see _elementwise) where PyTorch has a
complex kernel; the core's checks raise PyTorch's errors for the others.

Every kernel reuses the core's own shape/dtype/overlap checks (so errors match the CPU
kernels and PyTorch) and then launches one generated Triton kernel through
``_elementwise.launch``. float16/bfloat16 compute in float32 and round once at the store.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops._common import check_write, empty
from ember._src.ops.pointwise import elementwise as pw
from ember._src.ops.pointwise import fused as fp
from ember._src.tensor import Tensor

from . import _exprs
from ._elementwise import _INT31, _SHAPES, BIG, contiguous_info, launch, launch_linear, linear_plan
from ._storage import new_empty as new_empty_tensor  # one C call per result (device_storage.cpp)
from ._streams import _TLS as _STREAMS_TLS

_HALF = (dt.float16, dt.bfloat16)
_NUMBER = (bool, int, float)


def compute_of(d):
    return dt.float32 if d in _HALF else d


def _operand(x, device):
    """A tensor operand on ``device``; a 0-dim CPU tensor becomes a number (PyTorch allows it)."""
    if isinstance(x, Tensor):
        if x._device is not device:
            if x.ndim == 0 and x._device.type == "cpu":
                return x.item()
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{device} and {x._device}!")
        return x
    return x


def _check_real(*xs):
    for x in xs:
        if isinstance(x, Tensor) and x.dtype.is_complex:
            raise NotImplementedError(f"complex dtype {x.dtype} has no CUDA kernels in ember")


def _fast_args(t, n):
    """(data pointer, 16-byte aligned?) of a contiguous operand."""
    p = t._storage._ptr + t._offset * t.dtype.itemsize
    return p, not (p & 15)


def _binary_kernels(name: str, kind: str):
    table = _exprs.BINARY
    fast: dict = {}  # (dtype, other's dtype or number type) -> (result dtype, expr, spec, compute)

    def kernel(a, b):
        if type(a) is Tensor:
            # (each field read once into a local and the current stream read inline: this path is the per-op floor
            # of every same-shape binary op, e.g. a 1-element add; addresses from the storage, not data_ptr(),
            # which would run a capture's sync hook)
            tb = type(b)
            entry = fast.get((a.dtype, b.dtype if tb is Tensor else tb))
            shape, device = a._shape, a._device
            if entry is not None and (tb is not Tensor or (b._shape == shape and b._stride == a._stride and
                                                           b._device is device)):
                info = _SHAPES.get(shape) or contiguous_info(shape)
                n = info[1]
                if a._stride == info[0] and 0 < n < _INT31:
                    result, expr, spec, compute, plans = entry
                    out = new_empty_tensor(shape, result, device)
                    pa = a._storage._ptr + a._offset * a.dtype.itemsize
                    if tb is Tensor:
                        arg = b._storage._ptr + b._offset * b.dtype.itemsize
                        aligned = not ((pa | arg | n) & 15)
                    else:
                        arg = float(b) if compute.is_floating_point else int(b)
                        aligned = not ((pa | n) & 15)
                    plan = plans.get((aligned, n > BIG))
                    if plan is None:
                        plan = plans[(aligned, n > BIG)] = linear_plan(expr, spec, result, aligned, n, device)
                    streams = _STREAMS_TLS.streams  # current_handle(index)
                    s = streams.get(device.index or 0) if streams else None
                    block = plan[1]
                    plan[0](((n + block - 1) // block, 1, 1), 0 if s is None else s.cuda_stream, out._storage._ptr,
                            pa, arg, n)
                    return out
        shape, promoted, result = pw._binary_result(a, b, kind, name)
        device = pw._device_of(a, b)
        compute = compute_of(promoted)
        expr = _exprs.lookup(table, name, compute)
        out = empty(shape, result, device)
        oa, ob = _operand(a, device), _operand(b, device)
        launch(expr, out, [oa, ob], [compute, compute])
        # The plan is cached by the operands' own classes; a CPU scalar tensor turned number is not cached,
        # nor a complex computation (its numbers are two kernel arguments).
        if type(oa) is Tensor and type(ob) is type(b) and (type(ob) is Tensor or type(ob) in (int, float, bool)) and \
                not compute.is_complex:
            spec = (("t", a.dtype, compute), ("t", b.dtype, compute) if type(ob) is Tensor else ("s", compute))
            fast[(a.dtype, b.dtype if type(b) is Tensor else type(b))] = (result, expr, spec, compute, {})
        return out

    fast_ = {}

    def kernel_(self, other):
        if type(self) is Tensor:
            to = type(other)
            entry = fast_.get((self.dtype, other.dtype if to is Tensor else to))
            if entry is not None and (to is not Tensor or (other._shape == self._shape and other._stride ==
                                                           self._stride and other._storage is not self._storage and
                                                           other._device is self._device)):
                strides, n = contiguous_info(self._shape)
                if self._stride == strides and 0 < n < _INT31:
                    expr, spec, compute = entry
                    ps, al = _fast_args(self, n)
                    if to is Tensor:
                        po, alo = _fast_args(other, n)
                        launch_linear(expr, spec, self, ps, [ps, po], n, al and alo and not n & 15)
                    else:
                        v = float(other) if compute.is_floating_point else int(other)
                        launch_linear(expr, spec, self, ps, [ps, v], n, al and not n & 15)
                    self._bump_version()
                    return self
        if 0 in self._stride or (isinstance(other, Tensor) and other._storage is self._storage):
            check_write(self, (other,))
        shape, promoted, result = pw._binary_result(self, other, kind, name)
        if kind == pw._BOOL_RESULT and self.dtype.is_complex:  # eq_/ne_: the comparison written as 1 + 0j / 0
            pw._check_inplace(self, shape, self.dtype, name + "_")
            from ._ops_copy import device_copy

            device_copy(self, kernel(self, other))
            self._bump_version()
            return self
        pw._check_inplace(self, shape, self.dtype if kind == pw._BOOL_RESULT else result, name + "_")
        compute = compute_of(promoted)
        expr = _exprs.lookup(table, name, compute)
        oo = _operand(other, self._device)
        launch(expr, self, [self, oo], [compute, compute])
        self._bump_version()
        if kind != pw._BOOL_RESULT and result is self.dtype and type(oo) is type(other) and \
                (type(oo) is Tensor or type(oo) in (int, float)) and not compute.is_complex:
            spec = (("t", self.dtype, compute), ("t", other.dtype, compute) if type(oo) is Tensor else ("s", compute))
            fast_[(self.dtype, other.dtype if type(other) is Tensor else type(other))] = (expr, spec, compute)
        return self

    return kernel, kernel_


_BINARY_KIND = {n: pw._SAME_RESULT for n in (
    "add sub mul floor_divide remainder fmod pow maximum minimum fmax fmin nextafter").split()}
_BINARY_KIND.update({n: pw._FLOAT_RESULT for n in "div atan2 hypot copysign logaddexp logaddexp2 xlogy".split()})
_BINARY_KIND.update({n: pw._BOOL_RESULT for n in "eq ne lt le gt ge logical_and logical_or logical_xor".split()})
_BINARY_KIND.update({n: pw._INTEGRAL_ONLY for n in (
    "bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift").split()})


def _unary_kernels(name: str, kind: str):
    table = _exprs.UNARY
    fast: dict = {}  # input dtype -> (result dtype, expr, spec, compute)

    def run(a, args, out):
        result = pw._unary_result(a, kind, name)  # PyTorch's error for an op without a complex kernel
        if a.dtype.is_complex:
            compute = a.dtype  # abs/angle (a real result) and the predicates compute on the parts too
        else:
            compute = compute_of(a.dtype if kind == pw._PREDICATE_OP else result)
            if kind == pw._FLOAT_OP and not a.dtype.is_floating_point:
                compute = compute_of(result)
        expr = _exprs.lookup(table, name, compute)
        if out is None:
            out = empty(a._shape, result, a._device)
        params = [float(p) if compute.is_floating_point else p for p in args]
        launch(expr, out, [a, *params], [compute] * (1 + len(params)))
        if not args and not compute.is_complex:
            fast[a.dtype] = (result, expr, (("t", a.dtype, compute),), compute)
        return out, result

    def kernel(a, *args):
        if not args and type(a) is Tensor:
            entry = fast.get(a.dtype)
            if entry is not None:
                strides, n = contiguous_info(a._shape)
                if a._stride == strides and 0 < n < _INT31:
                    result, expr, spec, compute = entry
                    out = new_empty_tensor(a._shape, result, a._device)
                    pa, al = _fast_args(a, n)
                    launch_linear(expr, spec, out, out._storage._ptr, [pa], n, al and not n & 15)
                    return out
        return run(a, args, None)[0]

    def kernel_(self, *args):
        if name != "threshold" and 0 in self._stride:
            check_write(self)
        result = pw._unary_result(self, kind, name)
        if name == "square" and self.dtype is dt.bool:
            raise RuntimeError("result type Long can't be cast to the desired output type Bool")
        if kind != pw._PREDICATE_OP and result is not self.dtype:
            raise RuntimeError(f"result type {pw.type_name(result)} can't be cast to the desired output type "
                               f"{pw.type_name(self.dtype)}")
        run(self, args, self)
        self._bump_version()
        return self

    params = _scalar_params(name)
    if not params:
        return kernel, kernel_

    def kernel_params(a, *args, **kwargs):  # the schema's defaults and keywords, as the CPU kernel takes them
        return kernel(a, *_bind(name, params, args, kwargs))

    def kernel_params_(self, *args, **kwargs):
        return kernel_(self, *_bind(name, params, args, kwargs))

    return kernel_params, kernel_params_


def _scalar_params(name: str) -> tuple:
    """The (name, default) of a unary op's scalar parameters after ``self`` (elu's alpha, scale,
    input_scale), from its schema."""
    from ember._src.optable import Signature

    return tuple((p.name, p.default) for p in Signature.parse(OPS[name].schema).params[1:])


def _bind(name: str, params: tuple, args: tuple, kwargs: dict) -> tuple:
    if not kwargs and len(args) == len(params):
        return args
    if len(args) > len(params):
        raise TypeError(f"{name}() takes {len(params) + 1} positional arguments but {len(args) + 1} were given")
    values = list(args)
    for pname, default in params[len(args):]:
        values.append(kwargs.pop(pname, default))
    for pname, _ in params[:len(args)]:
        if pname in kwargs:
            raise TypeError(f"{name}() got multiple values for argument '{pname}'")
    if kwargs:
        raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kwargs))}'")
    return tuple(values)


def _where(condition, a, b):
    shape, dtype = pw._where_result(condition, a, b)
    device = condition._device
    out = empty(shape, dtype, device)
    # A bool result selects in int64 (a Python bool operand is then an integer kernel argument): tril/triu
    # of a bool matrix is where(mask, x, False).
    compute = dtype if dtype is not dt.bool else dt.int64
    expr = _exprs.COMPLEX_WHERE if dtype.is_complex else "tl.where({0}, {1}, {2})"
    launch(expr, out, [condition, _operand(a, device), _operand(b, device)], [dt.bool, compute, compute])
    return out


def fill_values(self, value) -> None:
    """fill_'s kernel without its version bump: the fill of a result nobody has seen yet (full, a pad,
    an empty sum), which PyTorch writes below the version counter (a fresh tensor is at _version 0)."""
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                               "dimensions.")
        check_write(self)
        value = value.item()
    if self.dtype.is_complex:
        launch(_exprs.COMPLEX_FILL, self, [value], [self.dtype])
        return
    if isinstance(value, complex):
        from ember._src.ops._common import type_name

        raise RuntimeError(f"value cannot be converted to type {type_name(self.dtype)} without overflow")
    compute = self.dtype if self.dtype is not dt.bool else dt.int64
    if self.dtype is dt.bool:
        value = int(bool(value))
    elif not self.dtype.is_floating_point:
        value = int(value)
    launch("tl.where(mask, {0}, {0})", self, [value], [compute_of(compute)])


def _fill_(self, value):
    fill_values(self, value)
    self._bump_version()
    return self


def _masked_fill_(self, mask, value):
    from ember._src.ops.indexing import subscripts as indexing

    indexing._check_mask(self, mask, value)
    indexing._check_partial_overlap(self, (mask,))
    v = value.item()
    compute = compute_of(self.dtype) if self.dtype is not dt.bool else dt.int64
    if mask._device is not self._device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{self._device} and {mask._device}!")
    if compute.is_complex:
        launch(_exprs.COMPLEX_MASKED_FILL, self, [self, mask, v], [compute, dt.bool, compute])
    else:
        launch("tl.where({1}, {2}, {0})", self, [self, mask, v if compute.is_floating_point else int(v)],
               [compute, dt.bool, compute])
    self._bump_version()
    return self


def _add_scaled_kernels():
    def run(self, other, alpha, in_place):
        if in_place:
            check_write(self, (other,))
        shape, promoted, scalars = fp.alpha_result(self, other, alpha)
        compute = compute_of(promoted)
        a = alpha if compute.is_complex else float(alpha) if compute.is_floating_point else int(alpha)
        if in_place:
            fp.check_inplace(self, shape, promoted)
            out = self
        else:
            out = empty(shape, promoted, self._device)
        expr = _exprs.COMPLEX_ADD_SCALED if compute.is_complex else "{0} + {1} * {2}"
        launch(expr, out, [self, _operand(other, self._device), a], [compute, compute, compute])
        if in_place:
            self._bump_version()
        return out

    return (lambda self, other, alpha: run(self, other, alpha, False),
            lambda self, other, alpha: run(self, other, alpha, True))


def _addc_kernels(name):
    expr = "{0} + {3} * {1} * {2}" if name == "addcmul" else "{0} + {3} * _div({1}, {2})"
    cexpr = _exprs.COMPLEX_ADDCMUL if name == "addcmul" else _exprs.COMPLEX_ADDCDIV

    def run(self, t1, t2, value, in_place):
        if in_place:
            check_write(self, (t1, t2))
        shape, promoted, scalars = fp._addc_result(name, self, t1, t2, value)
        compute = compute_of(promoted)
        if name == "addcdiv" and not (compute.is_floating_point or compute.is_complex):
            raise NotImplementedError("addcdiv of integer tensors has no CUDA kernel in ember")
        v = value if compute.is_complex else float(value) if compute.is_floating_point else int(value)
        if in_place:
            fp.check_inplace(self, shape, promoted)
            out = self
        else:
            out = empty(shape, promoted, self._device)
        d = self._device
        launch(cexpr if compute.is_complex else expr, out, [self, _operand(t1, d), _operand(t2, d), v], [compute] * 4)
        if in_place:
            self._bump_version()
        return out

    return (lambda self, t1, t2, value=1: run(self, t1, t2, value, False),
            lambda self, t1, t2, value=1: run(self, t1, t2, value, True))


def _lerp_kernels():
    def run(self, end, weight, in_place):
        _check_real(self, end, weight)
        if in_place:
            check_write(self, (end, weight))
        shape, dtype = fp._lerp_result(self, end, weight)
        compute = compute_of(dtype)
        if in_place:
            fp.check_inplace(self, shape, dtype)
            out = self
        else:
            out = empty(shape, dtype, self._device)
        d = self._device
        w = _operand(weight, d)
        w = float(w) if isinstance(w, _NUMBER) else w
        launch("tl.where(tl.abs({2}) < 0.5, {0} + {2} * ({1} - {0}), {1} - ({1} - {0}) * (1.0 - {2}))", out,
               [self, _operand(end, d), w], [compute] * 3)
        if in_place:
            self._bump_version()
        return out

    return (lambda self, end, weight: run(self, end, weight, False),
            lambda self, end, weight: run(self, end, weight, True))


def _clamp_(self, min=None, max=None):  # noqa: A002 - PyTorch's names
    check_write(self, (min, max))
    result = pw._clamp_kernel(self, min, max)  # composite: maximum/minimum ops, on CUDA
    pw._check_inplace(self, result._shape, result.dtype, "clamp_")
    from ._ops_copy import device_copy

    device_copy(self, result)
    self._bump_version()
    return self


def register() -> None:
    for name, kind in _BINARY_KIND.items():
        k, k_ = _binary_kernels(name, kind)
        OPS[name].kernels["cuda"] = k
        if name + "_" in OPS:
            OPS[name + "_"].kernels["cuda"] = k_
    kinds = {}
    for n in pw._UNARY_FLOAT + "gelu gelu_tanh silu mish hardsigmoid hardswish selu softsign tanhshrink softplus " \
            "elu celu logit i0 special_i1 special_modified_bessel_i0 special_modified_bessel_i1 special_erfcx " \
            "special_bessel_j0 special_bessel_j1 special_bessel_y0 special_bessel_y1 special_log_ndtr".split():
        kinds[n] = pw._FLOAT_OP
    for n in pw._UNARY_KEEP + "frac round round_decimals relu relu6 leaky_relu hardtanh threshold nan_to_num".split():
        kinds[n] = pw._KEEP_OP
    for n in pw._UNARY_PREDICATE:
        kinds[n] = pw._PREDICATE_OP
    for name, kind in kinds.items():
        if name not in _exprs.UNARY or name not in OPS:
            continue
        k, k_ = _unary_kernels(name, kind)
        OPS[name].kernels["cuda"] = k
        if name + "_" in OPS:
            OPS[name + "_"].kernels["cuda"] = k_
    OPS["where"].kernels["cuda"] = _where
    OPS["fill_"].kernels["cuda"] = _fill_
    OPS["masked_fill_"].kernels["cuda"] = _masked_fill_
    OPS["add_scaled"].kernels["cuda"], OPS["add_scaled_"].kernels["cuda"] = _add_scaled_kernels()
    for name in ("addcmul", "addcdiv"):
        OPS[name].kernels["cuda"], OPS[name + "_"].kernels["cuda"] = _addc_kernels(name)
    OPS["lerp"].kernels["cuda"], OPS["lerp_"].kernels["cuda"] = _lerp_kernels()
    OPS["clamp"].kernels["cuda"] = OPS["clamp"].kernels["cpu"]  # composite of maximum/minimum
    OPS["clamp_"].kernels["cuda"] = _clamp_
