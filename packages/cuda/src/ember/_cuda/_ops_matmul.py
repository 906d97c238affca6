"""CUDA kernels of the products: mm, addmm, bmm, baddbmm, addbmm, mv, addmv, dot.

They mirror the CPU kernels' structure (the core's checks, the same (batch, m, k) views) with
``_product`` on cuBLAS instead of the native CPU GEMM.
"""

from __future__ import annotations

from ember._src.dispatch import OPS
from ember._src.ops.linalg import products as la
from ember._src.ops.shape import views as vw
from ember._src.tensor import make_view

from . import _blas
from ._ops_copy import device_copy
from ._ops_pointwise import fill_values
from ._storage import new_empty as new_empty_tensor  # one frame per CUDA result


def _product(a, b, inp=None, beta=1, alpha=1):
    """(batch, m, n) = alpha * a @ b + beta * inp for 3-d ``a`` (batch or 1, m, k) and ``b``."""
    batch = max(a._shape[0], b._shape[0])
    m, k, n = a._shape[1], a._shape[2], b._shape[2]
    out = new_empty_tensor((batch, m, n), a.dtype, a._device)
    if out.numel() == 0:
        return out
    use_inp = inp is not None and beta != 0
    if use_inp:
        device_copy(out, inp)
    if k == 0 or alpha == 0:
        if not use_inp:
            fill_values(out, 0)
        elif beta != 1:
            OPS["mul_"].kernels["cuda"](out, beta)
        return out
    a2 = make_view(a, a._shape[1:], a._stride[1:], a._offset) if a._shape[0] == 1 else a
    b2 = make_view(b, b._shape[1:], b._stride[1:], b._offset) if b._shape[0] == 1 else b
    num = complex if a.dtype.is_complex else float
    _blas.gemm(a2, b2, out, batch, num(alpha), num(beta) if use_inp else 0.0)
    return out


def _same_device(*ts):
    dev = ts[0]._device
    for t in ts[1:]:
        if t is not None and t._device is not dev:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{dev} and {t._device}!")


def _mm(self, mat2):
    la._mm_check(self, mat2)
    _same_device(self, mat2)
    m, k, n = self._shape[0], self._shape[1], mat2._shape[1]
    if m and n and k:
        # _product's work for two matrices without its (1, m, n) views: one GEMM into a fresh (m, n).
        out = new_empty_tensor((m, n), self.dtype, self._device)
        _blas.gemm(self, mat2, out, 1)
        return out
    return vw.view_op(_product(la._as3(self, (1, m, k)), la._as3(mat2, (1, k, n))), (m, n))


def _addmm(self, mat1, mat2, *, beta=1, alpha=1):
    m, n = la._addmm_check(self, mat1, mat2, beta, alpha)
    _same_device(mat1, mat2, self)
    k = mat1._shape[1]
    if self.ndim == 1 and beta == 1 and alpha == 1 and m and n and k:
        # nn.Linear's case: the bias added by the GEMM's epilogue (cuBLASLt), no broadcast copy
        out = _blas.gemm_bias(mat1, mat2, self)
        if out is not None:
            return out
    inp = vw.expand_op(self, (1, m, n)) if self.ndim < 3 else self
    out = _product(la._as3(mat1, (1, m, k)), la._as3(mat2, (1, k, n)), inp, beta, alpha)
    return vw.view_op(out, (m, n))


def _bmm(self, mat2):
    la._bmm_check(self, mat2)
    _same_device(self, mat2)
    return _product(self, mat2)


def _baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    shape = la._baddbmm_check(self, batch1, batch2)
    _same_device(batch1, batch2, self)
    return _product(batch1, batch2, vw.expand_op(self, shape), beta, alpha)


def _addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    la._addbmm_check(self, batch1, batch2)
    _same_device(batch1, batch2, self)
    total = _product(batch1, batch2).sum(0)
    return total * alpha + self * beta if beta != 0 else total * alpha


def _mv(self, vec):
    la._mv_check(None, self, vec)
    _same_device(self, vec)
    m, k = self._shape
    return vw.view_op(_product(la._as3(self, (1, m, k)), la._as3(vec, (1, k, 1))), (m,))


def _addmv(self, mat, vec, *, beta=1, alpha=1):
    la._mv_check(self, mat, vec)
    _same_device(mat, vec, self)
    m, k = mat._shape
    inp = vw.expand_op(self, (1, m, 1)) if self.ndim == 0 else vw.view_op(vw.contiguous(self), (1, self._shape[0], 1))
    out = _product(la._as3(mat, (1, m, k)), la._as3(vec, (1, k, 1)), inp, beta, alpha)
    return vw.view_op(out, (m,))


def _dot(self, tensor):
    la._dot_check(self, tensor)
    _same_device(self, tensor)
    k = self._shape[0]
    return vw.view_op(_product(la._as3(self, (1, 1, k)), la._as3(tensor, (1, k, 1))), ())


def register() -> None:
    for name, fn in (("mm", _mm), ("addmm", _addmm), ("bmm", _bmm), ("baddbmm", _baddbmm), ("addbmm", _addbmm),
                     ("mv", _mv), ("addmv", _addmv), ("dot", _dot)):
        OPS[name].kernels["cuda"] = fn
