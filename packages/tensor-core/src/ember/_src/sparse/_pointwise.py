"""Sparse kernels of the pointwise ops: the result keeps the operand's sparsity pattern.

Registered on the existing ops (``OPS["abs"].kernels["sparse_cpu"]``): a layout is a dispatch
key. Unary ops that map 0 to 0 apply to the stored values; ones that do not (exp, cos, ...)
have no sparse kernel and raise PyTorch's "Could not run" error. Non-linear ops coalesce a COO
operand first (f(a) + f(b) is not f(a + b)); linear ones (neg, scaling) keep it as it is.
"""

from __future__ import annotations

import ember

from .. import dtypes as dt
from ..dispatch import OPS
from ..layouts import COMPRESSED, sparse_coo, strided
from ..tensor import DTYPE_CHANGES, Tensor
from ._convert import _coalesce_coo, _values_at, add_at, coalesce, compressed_to_coo, convert, linear_index
from ._core import make_compressed, make_coo, sparse_dim

COO, CSR = "sparse_cpu", "sparse_csr_cpu"

# f(0) == 0: these keep the pattern. (name, linear)
_UNARY = {
    "neg": True, "conj_physical": True, "abs": False, "relu": False, "sqrt": False, "sin": False, "sinh": False,
    "tan": False, "tanh": False, "asin": False, "asinh": False, "atan": False, "atanh": False, "expm1": False,
    "log1p": False, "sign": False, "sgn": False, "ceil": False, "floor": False, "round": False, "trunc": False,
    "frac": False, "square": False, "erf": False, "erfinv": False, "angle": False, "signbit": False,
    "isnan": False, "isinf": False, "isposinf": False, "isneginf": False, "nan_to_num": False, "relu6": False,
    "hardtanh": False, "leaky_relu": False, "rsqrt": None, "i0": None,
}


def with_values(t: Tensor, values: Tensor) -> Tensor:
    """``t``'s pattern holding ``values``."""
    if t._layout is sparse_coo:
        return make_coo(t._sp_indices, values, t._shape, t._coalesced)
    return make_compressed(t._layout, t._compressed, t._plain, values, t._shape)


def _unary_kernel(op, linear):
    def kernel(self, *args, **kwargs):
        if self._layout is sparse_coo and not linear:
            self = _coalesce_coo(self)
        return with_values(self, op(self._sp_values, *args, **kwargs))

    return kernel


def _unary_inplace_kernel(op, linear):
    def kernel(self, *args, **kwargs):
        if self._layout is sparse_coo and not linear and not self._coalesced:
            c = _coalesce_coo(self)
            self._sp_indices, self._sp_values, self._coalesced = c._sp_indices, c._sp_values, True
        op(self._sp_values, *args, **kwargs)
        self._bump_version()
        return self

    return kernel


for _name, _linear in _UNARY.items():
    if _linear is None or _name not in OPS:
        continue
    for _key in (COO, CSR):
        OPS[_name].kernels[_key] = _unary_kernel(OPS[_name], _linear)
        if _name + "_" in OPS:
            OPS[_name + "_"].kernels[_key] = _unary_inplace_kernel(OPS[_name + "_"], _linear)


def _is_scalar(x) -> bool:
    return not isinstance(x, Tensor) or (x._layout is strided and x.ndim == 0)


def _same_shape(a: Tensor, b: Tensor, what: str) -> None:
    if tuple(a._shape) != tuple(b._shape):
        raise RuntimeError(f"{what}: expected 'self' and 'other' to have same size, but self has size "
                           f"{list(a._shape)} while other has size {list(b._shape)} (FYI: dense-sparse addition "
                           f"does not currently support broadcasting)")


def _as_layout(coo: Tensor, layout) -> Tensor:
    return coo if layout is sparse_coo else convert(coo, layout)


def _to_coo(t: Tensor) -> Tensor:
    return t if t._layout is sparse_coo else compressed_to_coo(t)


def _result_dtype(a, b):
    return ember.result_type(a, b)


# -- add / sub ----------------------------------------------------------------------------------

def _add_sparse_sparse(a: Tensor, b: Tensor) -> Tensor:
    _same_shape(a, b, "add")
    if a._layout is not b._layout:
        raise RuntimeError(f"add: expected both operands in the same layout, got {a._layout} and {b._layout}")
    if sparse_dim(a) != sparse_dim(b) and a._layout is sparse_coo:
        raise RuntimeError(f"add: expected same number of sparse dims, got {sparse_dim(a)} and {sparse_dim(b)}")
    dtype = _result_dtype(a, b)
    if a._layout is sparse_coo:
        return _merge_coo(a, b, dtype)
    ca, cb = _to_coo(a), _to_coo(b)
    indices = ember.cat([ca._sp_indices, cb._sp_indices], 1)
    values = ember.cat([ca._sp_values.to(dtype), cb._sp_values.to(dtype)], 0)
    out = _coalesce_coo(make_coo(indices, values, ca._shape))
    return _rebuild_compressed(out, a)


def _merge_plan(ka, kb) -> tuple:
    """Which entry of ``a`` and of ``b`` (-1: none) each entry of ``a + b`` sums, as PyTorch's one
    merge pass over the two entry lists in their stored order: equal positions are summed, the
    smaller is taken first, and what is left of ``a`` then of ``b`` is appended."""
    import numpy as np  # only here: importing ember does not import NumPy
    ka, kb = np.asarray(ka, dtype=np.int64), np.asarray(kb, dtype=np.int64)
    if (ka[1:] >= ka[:-1]).all() and (kb[1:] >= kb[:-1]).all():
        # Sorted lists (duplicates allowed): the merge pairs the r-th copy of a position in a with the
        # r-th in b, and lists entries by (position, r); a stable sort of both lists gives that order.
        def rank(k):
            return np.arange(len(k)) - np.searchsorted(k, k)

        keys, ranks = np.concatenate([ka, kb]), np.concatenate([rank(ka), rank(kb)])
        source = np.concatenate([np.arange(len(ka)), np.arange(len(kb))])
        from_b = np.arange(len(keys)) >= len(ka)
        order = np.lexsort((ranks, keys))
        keys, ranks, source, from_b = keys[order], ranks[order], source[order], from_b[order]
        paired = (keys[:-1] == keys[1:]) & (ranks[:-1] == ranks[1:])  # an a entry, then its b entry
        first = np.concatenate([~paired, [True]]) if len(keys) else np.zeros(0, dtype=bool)
        keep = ~np.concatenate([[False], paired]) if len(keys) else first
        pair_next = np.concatenate([paired, [False]])[keep]
        next_source = np.concatenate([source[1:], [-1]])[keep]
        source, from_b = source[keep], from_b[keep]
        take_a = np.where(from_b, -1, source)
        take_b = np.where(pair_next, next_source, np.where(from_b, source, -1))
        return take_a, take_b
    ka, kb = ka.tolist(), kb.tolist()
    take_a, take_b = [], []
    i = j = 0
    while i < len(ka) and j < len(kb):
        if ka[i] == kb[j]:
            take_a.append(i)
            take_b.append(j)
            i, j = i + 1, j + 1
        elif ka[i] < kb[j]:
            take_a.append(i)
            take_b.append(-1)
            i += 1
        else:
            take_a.append(-1)
            take_b.append(j)
            j += 1
    take_a += list(range(i, len(ka))) + [-1] * (len(kb) - j)
    take_b += [-1] * (len(ka) - i) + list(range(j, len(kb)))
    return np.asarray(take_a, dtype=np.int64), np.asarray(take_b, dtype=np.int64)


def _merge_coo(a: Tensor, b: Tensor, dtype) -> Tensor:
    """COO ``a + b`` with PyTorch's entries (_merge_plan): coalesced when both operands are."""
    import numpy as np

    sdim = a._sp_indices._shape[0]
    sizes = a._shape[:sdim]
    take_a, take_b = _merge_plan(linear_index(a._sp_indices, sizes).numpy(),
                                 linear_index(b._sp_indices, sizes).numpy())

    def gather(t: Tensor, take) -> tuple:
        # the entries ``take`` names, zeros where it says -1 (a padding row past the last entry)
        nnz = t._sp_indices._shape[1]
        rows = ember.from_numpy(np.where(take < 0, nnz, take))
        values = t._sp_values.to(dtype)
        values = ember.cat([values, values.new_zeros((1,) + tuple(values._shape[1:]))], 0)
        indices = ember.cat([t._sp_indices, t._sp_indices.new_zeros((sdim, 1))], 1)
        return indices.index_select(1, rows), values.index_select(0, rows)

    indices_a, values_a = gather(a, take_a)
    indices_b, values_b = gather(b, take_b)
    indices = ember.where(ember.from_numpy(take_a >= 0), indices_a, indices_b)
    return make_coo(indices, values_a + values_b, a._shape, a._coalesced and b._coalesced)


def _rebuild_compressed(coo: Tensor, like: Tensor) -> Tensor:
    """A COO result (over blocks for BSR/BSC) back in ``like``'s compressed layout."""
    from ._convert import _to_blocked_from_block_coo

    return _to_blocked_from_block_coo(coo, like)


def _add_dense_sparse(dense: Tensor, sparse: Tensor, sparse_first: bool) -> Tensor:
    a, b = (sparse, dense) if sparse_first else (dense, sparse)
    _same_shape(a, b, "add")
    dtype = _result_dtype(dense, sparse)
    out = dense.to(dtype).clone() if dense.dtype is dtype else dense.to(dtype)
    return _accumulate_into(out.contiguous(), sparse)


def _accumulate_into(out: Tensor, sparse: Tensor) -> Tensor:
    """``out += sparse`` in place (out dense, contiguous)."""
    from ._convert import to_dense_op

    coo = _to_coo(sparse)
    if sparse._layout in COMPRESSED and coo.ndim != out.ndim:  # blocks: go through the dense form
        return out.add_(to_dense_op(sparse).to(out.dtype))
    sdim = coo._sp_indices._shape[0]
    flat = out.view((-1,) + tuple(out._shape[sdim:])) if sdim else out.unsqueeze(0)
    if coo._sp_values._shape[0]:
        if out.dtype is dt.bool:
            coo = _coalesce_coo(coo)
        add_at(flat, linear_index(coo._sp_indices, coo._shape[:sdim]), coo._sp_values.to(out.dtype))
    return out


def _add(self, other):
    if _is_scalar(other) or _is_scalar(self):
        raise RuntimeError("add(sparse, scalar) is not supported: the result would not be sparse; use "
                           "to_dense() first")
    if self._layout is not strided and other._layout is not strided:
        return _add_sparse_sparse(self, other)
    if self._layout is strided:
        return _add_dense_sparse(self, other, False)
    return _add_dense_sparse(other, self, True)


def _sub(self, other):
    return _add(self, OPS["neg"](other) if isinstance(other, Tensor) else -other)


def _scaled(other, alpha):
    """``alpha * other`` for the sparse ``other`` of ``add(..., alpha=)``, or a dense one (``sparse + dense``)."""
    return OPS["mul"](other, alpha) if isinstance(other, Tensor) and other._layout is strided else _mul(other, alpha)


def _add_scaled(self, other, alpha):
    return _add(self, _scaled(other, alpha))


def _add_(self, other):
    if self._layout is strided:
        _same_shape(self, other, "add_")
        return _accumulate_into(self, other) if self.is_contiguous() else self.copy_(_add(self, other))
    result = _add(self, other)
    if result._layout is strided:
        raise RuntimeError("add_: a sparse tensor cannot hold the (dense) sum; use the out-of-place add")
    _assign(self, result)
    return self


def _add_scaled_(self, other, alpha):
    return _add_(self, _scaled(other, alpha))


def _assign(self: Tensor, src: Tensor) -> None:
    """Points sparse ``self`` at ``src``'s members (in-place ops, copy_)."""
    if src._layout is not self._layout:
        src = convert(src, self._layout)
    if src.dtype is not self.dtype:
        DTYPE_CHANGES[0] += 1
    for name in ("_sp_indices", "_sp_values", "_coalesced", "_compressed", "_plain"):
        if name in src.__dict__:
            self.__dict__[name] = src.__dict__[name]
    self._shape = src._shape
    self.dtype = src.dtype
    self._bump_version()


for _key in (COO, CSR):
    OPS["add"].kernels[_key] = _add
    OPS["sub"].kernels[_key] = _sub
    OPS["add_scaled"].kernels[_key] = _add_scaled
    OPS["add_"].kernels[_key] = _add_
    OPS["add_scaled_"].kernels[_key] = _add_scaled_


# -- mul / div --------------------------------------------------------------------------------

def _mul_sparse_sparse(a: Tensor, b: Tensor) -> Tensor:
    _same_shape(a, b, "mul")
    layout = a._layout
    ca, cb = coalesce(_to_coo(a)), coalesce(_to_coo(b))
    sdim = ca._sp_indices._shape[0]
    ka, kb = linear_index(ca._sp_indices, ca._shape[:sdim]), linear_index(cb._sp_indices, cb._shape[:sdim])
    pos = ember.searchsorted(kb, ka).clamp(max=max(kb.numel() - 1, 0))
    hit = (kb.index_select(0, pos) == ka) if kb.numel() else ember.zeros(ka._shape, dtype=dt.bool)
    keep = hit.nonzero().reshape(-1)
    values = ca._sp_values.index_select(0, keep) * cb._sp_values.index_select(0, pos.index_select(0, keep))
    out = make_coo(ca._sp_indices.index_select(1, keep), values, ca._shape, True)
    if layout is not sparse_coo:
        return _rebuild_compressed(out, a)
    out._coalesced = a._coalesced and b._coalesced  # PyTorch's flag (the entries are distinct and sorted)
    return out


def _mul(self, other):
    if _is_scalar(other):
        return with_values(self, OPS["mul"](self._sp_values, other))
    if _is_scalar(self):
        return with_values(other, OPS["mul"](self, other._sp_values))
    if self._layout is not strided and other._layout is not strided:
        return _mul_sparse_sparse(self, other)
    sparse, dense = (self, other) if other._layout is strided else (other, self)
    if tuple(dense._shape) != tuple(sparse._shape):
        dense = dense.expand(sparse._shape)
    coo = _to_coo(sparse)
    if sparse._layout in COMPRESSED and coo.ndim != dense.ndim:
        return convert(_mul(ember.Tensor.to_dense(sparse), dense), sparse._layout, sparse._sp_values._shape[1:3])
    values = coo._sp_values * _values_at(dense, coo._sp_indices, coo._shape)
    return with_values(sparse, values)


def _div(self, other):
    if self._layout is strided:
        raise RuntimeError("div: dividing by a sparse tensor is not supported (its zeros would give inf)")
    if _is_scalar(other):
        return with_values(self, OPS["div"](self._sp_values, other))
    if other._layout is not strided:
        raise RuntimeError("div: dividing by a sparse tensor is not supported (its zeros would give inf)")
    coo = _to_coo(self)
    dense = other if tuple(other._shape) == tuple(self._shape) else other.expand(self._shape)
    return with_values(self, coo._sp_values / _values_at(dense, coo._sp_indices, coo._shape))


def _scalar_inplace(op_name):
    def kernel(self, other):
        if self._layout is strided or not _is_scalar(other):
            _assign(self, OPS[op_name[:-1]](self, other)) if self._layout is not strided else self.copy_(
                OPS[op_name[:-1]](self, other))
            return self
        OPS[op_name](self._sp_values, other)
        self._bump_version()
        return self

    return kernel


def _pow(self, exponent):
    if not _is_scalar(exponent) or float(exponent) <= 0:
        raise RuntimeError("pow: a sparse tensor can only be raised to a positive scalar power")
    if self._layout is sparse_coo:
        self = _coalesce_coo(self)
    return with_values(self, OPS["pow"](self._sp_values, exponent))


for _key in (COO, CSR):
    OPS["mul"].kernels[_key] = _mul
    OPS["div"].kernels[_key] = _div
    OPS["mul_"].kernels[_key] = _scalar_inplace("mul_")
    OPS["div_"].kernels[_key] = _scalar_inplace("div_")
    OPS["pow"].kernels[_key] = _pow
