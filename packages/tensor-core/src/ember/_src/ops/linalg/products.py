"""Matrix products: mm, bmm, mv, dot and their add* forms as ops; matmul, outer, inner,
tensordot, einsum and chain_matmul composed from them (as in PyTorch, so autograd only needs
formulas for the primitives).

Every primitive runs the one native kernel ``_C.matmul_`` (batched ``out = beta*out +
alpha*a@b`` on (B, M, K) @ (B, K, N)): float32/float64 through OpenBLAS, integers through a
C++ kernel, float16/bfloat16 computed in float32 and rounded once.
"""

from __future__ import annotations

import builtins

from ... import dtypes
from ..._native import _C
from ...autocast import composite as _autocast_composite
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import broadcast_shapes, numel
from ...tensor import Tensor, make_view, new_empty_tensor
from .._common import HALF_TYPES, check_scalar_fits, convert, empty, type_name, write_out
from ..pointwise import elementwise
from ..pointwise.complex import conj_physical_op
from ..shape import views

# c10's spelling of dtypes in the "expected m1 and m2 to have the same dtype" message.
_CPP_NAMES = {
    "bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
    "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float",
    "float64": "double", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
}


def _check_tensor(x, fn: str, arg: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position 1) must be Tensor, not {type(x).__name__}")


def _check_dtypes(a: Tensor, b: Tensor) -> None:
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_CPP_NAMES[a.dtype.name]} != "
                           f"{_CPP_NAMES[b.dtype.name]}")


def _check_not_bool(dtype, kernel: str) -> None:
    if dtype is dtypes.bool:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _scalar(value, dtype, name: str):
    """alpha/beta as the Python number the kernel takes for ``dtype``."""
    if not isinstance(value, (builtins.bool, int, float, complex)):
        raise TypeError(f"argument '{name}' must be Number, not {type(value).__name__}")
    if isinstance(value, complex) and not dtype.is_complex:
        check_scalar_fits(value, dtype)  # a complex alpha/beta for a real product: PyTorch's RuntimeError
    if dtype.is_complex:
        return complex(value)
    if dtype.is_floating_point:
        return float(value)
    return int(value)


def _product(a3: Tensor, b3: Tensor, input: Tensor | None = None, beta=0, alpha=1) -> Tensor:
    """(B, M, N) = beta * input + alpha * a3 @ b3, with ``input`` broadcast to (B, M, N)."""
    shape = (a3._shape[0], a3._shape[1], b3._shape[2])
    dtype = a3.dtype
    if a3._device is META:
        return empty(shape, dtype, META)
    compute = dtypes.float32 if dtype in HALF_TYPES else dtype
    out = empty(shape, compute, a3._device)
    use_input = input is not None and beta != 0
    if use_input:
        _C.copy_(out, input)  # copy_ broadcasts input to out's shape
    _C.matmul_(out, convert(a3, compute), convert(b3, compute), _scalar(alpha, compute, "alpha"),
               _scalar(beta, compute, "beta") if use_input else 0)
    return out if compute is dtype else convert(out, dtype)


def _as3(t: Tensor, shape3: tuple) -> Tensor:
    """A stride-preserving (1, r, c) view of a matrix, or (r, c) of a vector, without dispatch."""
    if t.ndim == 2:
        return make_view(t, shape3, (0,) + t._stride, t._offset)
    if t.ndim == 1:
        s = t._stride[0]
        stride = (0, s, 1) if shape3[2] == 1 else (0, 1, s)
        return make_view(t, shape3, stride, t._offset)
    return t


def _declare(schema: str, meta):
    op = define(schema, (), meta)
    op.kernels["meta"] = meta
    return op


# -- mm / addmm ---------------------------------------------------------------------------

def _mm_check(a: Tensor, b: Tensor) -> None:
    if len(a._shape) != 2:
        raise RuntimeError("self must be a matrix")
    if len(b._shape) != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a._shape[1] != b._shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a._shape[0]}x{a._shape[1]} and "
                           f"{b._shape[0]}x{b._shape[1]})")
    if a.dtype is not b.dtype:  # (the checks' frames only on their errors: ~150 mm calls a GPT-2 step)
        _check_dtypes(a, b)
    if a.dtype is dtypes.bool:
        _check_not_bool(a.dtype, "addmm_impl_cpu_")


def _mm_meta(self, mat2):
    _mm_check(self, mat2)
    return empty((self._shape[0], mat2._shape[1]), self.dtype, META)


mm_op = _declare("mm(Tensor self, Tensor mat2) -> Tensor", _mm_meta)


@mm_op.kernel("cpu")
def _mm_cpu(self, mat2):
    _mm_check(self, mat2)
    m, k, n = self._shape[0], self._shape[1], mat2._shape[1]
    dtype = self.dtype
    if dtype in HALF_TYPES:
        return views.view_op(_product(_as3(self, (1, m, k)), _as3(mat2, (1, k, n))), (m, n))
    # The kernel takes the matrices as they are (a batch of one): no views, no reshape of the
    # result, which at 64x64 cost three times the product itself.
    out = new_empty_tensor((m, n), dtype, self._device)
    _C.matmul_(out, self, mat2, _ONE.get(dtype) or _scalar(1, dtype, "alpha"), 0)
    return out


_ONE = {dtypes.float32: 1.0, dtypes.float64: 1.0}


def _addmm_check(input, mat1, mat2, beta, alpha):
    # PyTorch checks the dtypes (self against mat2, then mat1 against mat2) before any shape.
    for name, t in (("self", input), ("mat1", mat1)):
        if isinstance(t, Tensor) and isinstance(mat2, Tensor) and t.dtype is not mat2.dtype:
            raise RuntimeError(f"{name} and mat2 must have the same dtype, but got {type_name(t.dtype)} and "
                               f"{type_name(mat2.dtype)}")
    _mm_check(mat1, mat2)
    shape = (mat1._shape[0], mat2._shape[1])
    views.expand_op(input, shape)  # raises PyTorch's broadcast error
    return shape


def _addmm_meta(self, mat1, mat2, *, beta=1, alpha=1):
    return empty(_addmm_check(self, mat1, mat2, beta, alpha), self.dtype, META)


addmm_op = _declare("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                    _addmm_meta)


@addmm_op.kernel("cpu")
def _addmm_cpu(self, mat1, mat2, *, beta=1, alpha=1):
    m, n = _addmm_check(self, mat1, mat2, beta, alpha)
    k = mat1._shape[1]
    out = _product(_as3(mat1, (1, m, k)), _as3(mat2, (1, k, n)), self, beta, alpha)
    return views.view_op(out, (m, n))


# -- bmm / baddbmm / addbmm -----------------------------------------------------------------

def _bmm_check(a: Tensor, b: Tensor, kernel: str = "bmm") -> None:
    if a.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    expected = [a._shape[0], a._shape[2]]
    if list(b._shape[:2]) != expected:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: {expected} but got: "
                           f"{list(b._shape[:2])}.")
    _check_dtypes(a, b)
    _check_not_bool(a.dtype, kernel)


def _bmm_meta(self, mat2):
    _bmm_check(self, mat2)
    return empty((self._shape[0], self._shape[1], mat2._shape[2]), self.dtype, META)


bmm_op = _declare("bmm(Tensor self, Tensor mat2) -> Tensor", _bmm_meta)


@bmm_op.kernel("cpu")
def _bmm_cpu(self, mat2):
    _bmm_check(self, mat2)
    return _product(self, mat2)


def _baddbmm_check(input, b1, b2):
    _bmm_check(b1, b2, "baddbmm")
    if input.dtype is not b1.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {type_name(input.dtype)} and "
                           f"{type_name(b1.dtype)}")
    shape = (b1._shape[0], b1._shape[1], b2._shape[2])
    views.expand_op(input, shape)
    return shape


def _baddbmm_meta(self, batch1, batch2, *, beta=1, alpha=1):
    return empty(_baddbmm_check(self, batch1, batch2), self.dtype, META)


baddbmm_op = _declare(
    "baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", _baddbmm_meta)


@baddbmm_op.kernel("cpu")
def _baddbmm_cpu(self, batch1, batch2, *, beta=1, alpha=1):
    _baddbmm_check(self, batch1, batch2)
    return _product(batch1, batch2, self, beta, alpha)


def _addbmm_check(input, b1, b2):
    _bmm_check(b1, b2, "addbmm")
    if input.dtype is not b1.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {type_name(input.dtype)} and "
                           f"{type_name(b1.dtype)}")
    shape = (b1._shape[1], b2._shape[2])
    views.expand_op(input, shape)
    return shape


def _addbmm_meta(self, batch1, batch2, *, beta=1, alpha=1):
    return empty(_addbmm_check(self, batch1, batch2), self.dtype, META)


addbmm_op = _declare(
    "addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", _addbmm_meta)


@addbmm_op.kernel("cpu")
def _addbmm_cpu(self, batch1, batch2, *, beta=1, alpha=1):
    m, n = _addbmm_check(self, batch1, batch2)
    bsz, k = batch1._shape[0], batch1._shape[2]
    # sum_b A_b @ B_b is one product: (M, B*K) @ (B*K, N).
    a = views.reshape(views.permute_op(batch1, (1, 0, 2)), (1, m, bsz * k))
    b = views.reshape(batch2, (1, bsz * k, n))
    return views.view_op(_product(a, b, self, beta, alpha), (m, n))


# -- mv / addmv / dot ---------------------------------------------------------------------

def _mv_check(input, mat, vec, kernel="addmv_impl_cpu"):
    if mat.ndim != 2 or vec.ndim != 1 or (input is not None and input.ndim > 1):
        raise RuntimeError(f"vector + matrix @ vector expected, got {1 if input is None else input.ndim}, "
                           f"{mat.ndim}, {vec.ndim}")
    m, k = mat._shape
    if vec._shape[0] != k or (input is not None and input.ndim == 1 and input._shape[0] not in (1, m)):
        size = m if input is None else (input._shape[0] if input.ndim else 1)
        raise RuntimeError(f"size mismatch, got input ({size}), mat ({m}x{k}), vec ({vec._shape[0]})")
    _check_dtypes(mat, vec)
    if input is not None and input.dtype is not mat.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {type_name(input.dtype)} and "
                           f"{type_name(mat.dtype)}")
    _check_not_bool(mat.dtype, kernel)
    return (m,)


def _mv_meta(self, vec):
    return empty(_mv_check(None, self, vec), self.dtype, META)


mv_op = _declare("mv(Tensor self, Tensor vec) -> Tensor", _mv_meta)


@mv_op.kernel("cpu")
def _mv_cpu(self, vec):
    _mv_check(None, self, vec)
    m, k = self._shape
    return views.view_op(_product(_as3(self, (1, m, k)), _as3(vec, (1, k, 1))), (m,))


def _addmv_meta(self, mat, vec, *, beta=1, alpha=1):
    return empty(_mv_check(self, mat, vec), self.dtype, META)


addmv_op = _declare("addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                    _addmv_meta)


@addmv_op.kernel("cpu")
def _addmv_cpu(self, mat, vec, *, beta=1, alpha=1):
    _mv_check(self, mat, vec)
    m, k = mat._shape
    inp = (
        views.view_op(self, (1, 1, 1))
        if self.ndim == 0
        else views.view_op(views.contiguous(self), (1, self._shape[0], 1))
    )
    out = _product(_as3(mat, (1, m, k)), _as3(vec, (1, k, 1)), inp, beta, alpha)
    return views.view_op(out, (m,))


def _dot_check(a, b, name="dot"):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{name} : expected both vectors to have same dtype, but found {type_name(a.dtype)} and "
                           f"{type_name(b.dtype)}")
    if a._shape[0] != b._shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a._shape[0]}] and src [{b._shape[0]}] to "
                           f"have the same number of elements, but got {a._shape[0]} and {b._shape[0]} elements "
                           f"respectively")
    _check_not_bool(a.dtype, name)


def _dot_meta(self, tensor):
    _dot_check(self, tensor)
    return empty((), self.dtype, META)


dot_op = _declare("dot(Tensor self, Tensor tensor) -> Tensor", _dot_meta)


@dot_op.kernel("cpu")
def _dot_cpu(self, tensor):
    _dot_check(self, tensor)
    k = self._shape[0]
    return views.view_op(_product(_as3(self, (1, 1, k)), _as3(tensor, (1, k, 1))), ())


# -- public functions -----------------------------------------------------------------------

def _out(result: Tensor, out: Tensor | None, inputs=(), overlap: bool = True) -> Tensor:
    """out= of the products; ``overlap=False`` where PyTorch writes through unchecked (bmm, mv, dot ...)."""
    if out is not None and isinstance(out, Tensor) and out.dtype is not result.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {_CPP_NAMES[result.dtype.name].split('::')[-1]}, "
                           f"but got {_CPP_NAMES[out.dtype.name].split('::')[-1]} instead")
    return write_out(result, out, inputs, overlap=overlap)


def mm(input: Tensor, mat2: Tensor, *, out: Tensor | None = None) -> Tensor:
    if out is None:  # _out(result, None) is the result: no frame for it
        return mm_op(input, mat2)
    return _out(mm_op(input, mat2), out)


def bmm(input: Tensor, mat2: Tensor, *, out: Tensor | None = None) -> Tensor:
    return _out(bmm_op(input, mat2), out, overlap=False)


def mv(input: Tensor, vec: Tensor, *, out: Tensor | None = None) -> Tensor:
    return _out(mv_op(input, vec), out, overlap=False)


def dot(input: Tensor, tensor: Tensor, *, out: Tensor | None = None) -> Tensor:
    return _out(dot_op(input, tensor), out, overlap=False)


def vdot(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    _dot_check(input, other, "vdot")
    if input.dtype.is_complex:  # vdot conjugates its first argument

        input = conj_physical_op(input)
    return _out(dot_op(input, other), out, overlap=False)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1, out: Tensor | None = None) -> Tensor:
    return _out(addmm_op(input, mat1, mat2, beta=beta, alpha=alpha), out, (input,))


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1, out: Tensor | None = None) -> Tensor:
    return _out(addmv_op(input, mat, vec, beta=beta, alpha=alpha), out, overlap=False)


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1, out: Tensor | None = None) -> Tensor:
    return _out(baddbmm_op(input, batch1, batch2, beta=beta, alpha=alpha), out, overlap=False)


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1, out: Tensor | None = None) -> Tensor:
    return _out(addbmm_op(input, batch1, batch2, beta=beta, alpha=alpha), out)


def _inplace(fn):
    def method(self: Tensor, *args, beta=1, alpha=1):
        result = fn(self, *args, beta=beta, alpha=alpha)
        if result._shape != self._shape:
            raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast shape "
                               f"{list(result._shape)}")
        return views.copy_(self, result)

    method.__name__ = method.__qualname__ = fn.__name__ + "_"  # pickled by name
    return method


addmm_, addmv_, baddbmm_, addbmm_ = _inplace(addmm), _inplace(addmv), _inplace(baddbmm), _inplace(addbmm)


def outer(input: Tensor, vec2: Tensor, *, out: Tensor | None = None) -> Tensor:
    for name, v in (("self", input), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v.ndim}-D")
    return write_out(elementwise.mul(views.view_op(input, (input._shape[0], 1)), vec2), out, (input, vec2))


ger = outer


def _check_addr_scalar(value, name: str, dtype) -> None:
    """PyTorch's addr checks of beta and alpha against the result type."""
    if isinstance(value, builtins.bool) and dtype is not dtypes.bool:
        raise RuntimeError(f"Boolean {name} only supported for Boolean results.")
    if isinstance(value, float) and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"For integral input tensors, argument {name} must not be a floating point number.")
    if isinstance(value, complex) and not dtype.is_complex:
        check_scalar_fits(value, dtype)


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1, out: Tensor | None = None) -> Tensor:
    if all(isinstance(t, Tensor) for t in (input, vec1, vec2)):
        dtype = dtypes.result_type_of(input, vec1, vec2)
        _check_addr_scalar(beta, "beta", dtype)
        _check_addr_scalar(alpha, "alpha", dtype)
        if dtype is dtypes.bool:  # (beta and input) or (alpha and outer): bool stays bool
            beta, alpha = builtins.bool(beta), builtins.bool(alpha)
    prod = outer(vec1, vec2)
    if alpha != 1:
        prod = elementwise.mul(prod, alpha)
    result = prod if beta == 0 else elementwise.add(elementwise.mul(input, beta) if beta != 1 else input, prod)
    if result._shape != prod._shape:
        views.expand_op(input, prod._shape)
    return write_out(result, out, (input, vec1, vec2))


@_autocast_composite("lower")
def matmul(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    # Two plain matrices and no out=: straight to mm (the op still runs every dispatch layer).
    # At 64x64 the checks and branches below cost a tenth of the product.
    if out is None and type(input) is Tensor and type(other) is Tensor and len(input._shape) == 2 \
            and len(other._shape) == 2:
        return mm_op(input, other)
    _check_tensor(input, "matmul", "input")
    _check_tensor(other, "matmul", "other")
    # PyTorch checks out= only where matmul runs as one mm (other a matrix); bmm/mv/dot paths write through.
    return _out(_matmul(input, other), out, overlap=other.ndim == 2 and input.ndim >= 2)


def _matmul(a: Tensor, b: Tensor) -> Tensor:
    da, db = a.ndim, b.ndim
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    if da == 1 and db == 1:
        return dot_op(a, b)
    if da == 2 and db == 1:
        return mv_op(a, b)
    if da == 1 and db == 2:
        return views.squeeze_op(mm_op(views.unsqueeze_op(a, 0), b), (0,))
    if da == 2 and db == 2:
        return mm_op(a, b)
    if da >= 3 and db <= 2 and _folds_without_copy(a, b):
        # Fold a's batch dims into its rows: one mm instead of a batch of small ones.
        rows = views.reshape(a, (numel(a._shape[:-1]), a._shape[-1]))
        if db == 1:
            return views.reshape(mv_op(rows, b), a._shape[:-1])
        return views.reshape(mm_op(rows, b), a._shape[:-1] + (b._shape[1],))
    if da == 3 and db == 3 and a._shape[0] == b._shape[0]:
        return bmm_op(a, b)
    # Batched: broadcast the batch dims, flatten them, bmm.
    a2 = views.unsqueeze_op(a, 0) if da == 1 else a
    b2 = views.unsqueeze_op(b, -1) if db == 1 else b
    batch = broadcast_shapes(a2._shape[:-2], b2._shape[:-2])
    m, k = a2._shape[-2:]
    k2, n = b2._shape[-2:]
    nb = numel(batch)
    a3 = views.reshape(views.expand_op(a2, batch + (m, k)), (nb, m, k))
    b3 = views.reshape(views.expand_op(b2, batch + (k2, n)), (nb, k2, n))
    result = views.view_op(bmm_op(a3, b3), batch + (m, n))
    if da == 1:
        result = views.squeeze_op(result, (-2,))
    if db == 1:
        result = views.squeeze_op(result, (-1,))
    return result


def _folds_without_copy(a: Tensor, b: Tensor) -> bool:
    """PyTorch's rule for folding a's batch dims into one mm: when a's leading dims collapse as a
    view (no copy), or when ``b`` requires grad (its gradient is then one mm too); an expanded or
    permuted ``a`` runs as bmm instead (which FlopCounterMode and profilers see)."""
    if b.requires_grad:
        return True
    shape, strides = a._shape, a.stride()
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(len(shape) - 2))


# The native fast path (csrc/common/fast_reduce.cpp, fast_front.cpp): mm of two float matrices runs in
# C, and matmul of two plain matrices goes straight to it; anything else takes the functions above.
mm_op._set_fast(11, 0, 0)
matmul = _C.FastFront(mm_op, 12, matmul)
# addmm(input, mat1, mat2) (nn.functional.linear's call): float, input broadcast; beta/alpha other
# than 1 when no argument needs grad.
addmm_op._set_fast(13, 0, 0)
addmm = _C.FastFront(addmm_op, 15, addmm)
# bmm(input, mat2) of two float batches (attention's products).
bmm_op._set_fast(18, 0, 0)
bmm = _C.FastFront(bmm_op, 18, bmm)

# Contractions built on the primitives above.
from .contract import chain_matmul, einsum, inner, multi_dot, tensordot  # noqa: E402,F401

# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
addbmm                      function method
addbmm_                     method
addmm                       function method
addmm_                      method
addmv                       function method
addmv_                      function method
addr                        function method
baddbmm                     function method
baddbmm_                    method
bmm                         function method
dot                         function method
matmul                      function method linalg=matmul
mm                          function method
mv                          function method
outer                       function method alias=ger
vdot                        function method
""")
