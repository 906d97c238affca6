"""Sparse tensors: how they are held, built and validated.

A sparse tensor is a plain ``ember.Tensor`` whose ``_layout`` (an instance attribute) is not
``strided``. Its data lives in dense member tensors, never in its own storage (an empty one,
whose counter still versions the tensor for autograd):

- COO (``sparse_coo``): ``_sp_indices`` (int64, sparse_dim x nnz), ``_sp_values`` (nnz x dense dims),
  ``_coalesced`` (entries sorted row-major without duplicates).
- compressed (``sparse_csr/csc/bsr/bsc``): ``_compressed`` (crow or ccol pointers, n + 1),
  ``_plain`` (col or row of each stored element or block), ``_sp_values`` (nnz [x blocksize] x dense
  dims).

Note [Sparse invariants]: every constructor checks its indices (bounds, compressed pointers,
sorted and distinct plain indices per row) before the tensor exists, whatever
``check_invariants`` says, so that no kernel can read out of bounds. PyTorch checks only on
request; ember raises the same errors, earlier (docs/deviations.md, "Sparse tensors").
"""

from __future__ import annotations

import ember

from .. import dispatch
from .. import dtypes as dt
from .._native import _C
from ..dispatch import define
from ..layouts import COMPRESSED, sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided
from ..tensor import Tensor, make_tensor

_COMPRESSED_NAMES = {
    sparse_csr: ("crow_indices", "col_indices"),
    sparse_bsr: ("crow_indices", "col_indices"),
    sparse_csc: ("ccol_indices", "row_indices"),
    sparse_bsc: ("ccol_indices", "row_indices"),
}
_LAYOUT_WORDS = {strided: "Strided", sparse_coo: "Sparse", sparse_csr: "SparseCsr", sparse_csc: "SparseCsc",
                 sparse_bsr: "SparseBsr", sparse_bsc: "SparseBsc"}


def layout_word(t: Tensor) -> str:
    return _LAYOUT_WORDS.get(t._layout, str(t._layout))


def _shell(layout, shape: tuple, values: Tensor) -> Tensor:
    storage = _C.Storage.allocate(0, False) if values._device.type == "cpu" else _C.Storage.meta(0)
    t = make_tensor(storage, tuple(int(s) for s in shape), (), 0, values.dtype, values._device)
    t._layout = layout
    dispatch._LAYOUT_DISPATCH[0] = True
    return t


def make_coo(indices: Tensor, values: Tensor, shape, coalesced: bool = False) -> Tensor:
    """A COO tensor over already-validated members (no checks, no copies)."""
    t = _shell(sparse_coo, shape, values)
    t._sp_indices = indices
    t._sp_values = values
    t._coalesced = bool(coalesced) or indices._shape[1] <= 1
    return t


def make_compressed(layout, compressed: Tensor, plain: Tensor, values: Tensor, shape) -> Tensor:
    """A compressed-layout tensor over already-validated members."""
    t = _shell(layout, shape, values)
    t._compressed = compressed
    t._plain = plain
    t._sp_values = values
    return t


def sparse_dim(t: Tensor) -> int:
    if t._layout is sparse_coo:
        return t._sp_indices._shape[0]
    if t._layout in COMPRESSED:
        return 2
    return 0


def dense_dim(t: Tensor) -> int:
    if t._layout is sparse_coo:
        return t._sp_values.ndim - 1
    if t._layout in (sparse_csr, sparse_csc):
        return t._sp_values.ndim - 1
    if t._layout in (sparse_bsr, sparse_bsc):
        return t._sp_values.ndim - 3
    return t.ndim


def blocksize(t: Tensor) -> tuple:
    return tuple(t._sp_values._shape[1:3]) if t._layout in (sparse_bsr, sparse_bsc) else (1, 1)


# The constructors' last step is an op, so that values that require grad get their gradient (the
# result's gradient at each stored position): programs build sparse attention or adjacency values
# from computed tensors. The arguments are validated before (these ops trust them).
coo_from_members_op = define("_sparse_coo_tensor_unsafe(Tensor indices, Tensor values, SymInt[] size, "
                             "bool is_coalesced=False) -> Tensor")
compressed_from_members_op = define("_sparse_compressed_tensor_unsafe(Tensor compressed_indices, "
                                    "Tensor plain_indices, Tensor values, SymInt[] size, Layout layout) -> Tensor")


@coo_from_members_op.kernel("cpu")
def _coo_from_members(indices, values, size, is_coalesced=False):
    return make_coo(indices, values, tuple(size), is_coalesced)


@compressed_from_members_op.kernel("cpu")
def _compressed_from_members(compressed_indices, plain_indices, values, size, layout):
    return make_compressed(layout, compressed_indices, plain_indices, values, tuple(size))


# -- argument conversion ------------------------------------------------------------------------

def as_index_tensor(obj, what: str) -> Tensor:
    t = obj if isinstance(obj, Tensor) else ember.as_tensor(obj)
    if t._layout is not strided:
        raise TypeError(f"{what} must be a strided tensor, got layout {t._layout}")
    if t.dtype not in (dt.int64, dt.int32, dt.int16, dt.int8, dt.uint8):
        if t.numel() == 0:
            return t.to(dt.int64)
        raise RuntimeError(f"{what} must be an int64 tensor")
    return t.to(dt.int64)


def as_values_tensor(obj, dtype, device) -> Tensor:
    if isinstance(obj, Tensor):
        if obj._layout is not strided:
            raise TypeError(f"values must be a strided tensor, got layout {obj._layout}")
        t = obj
        if dtype is not None and t.dtype is not dtype:
            t = t.to(dtype)
    else:
        t = ember.as_tensor(obj, dtype=dtype)
    if device is not None:
        t = t.to(device)
    return t


def _sizes(size) -> tuple:
    if size is None:
        return None
    if isinstance(size, int):
        size = (size,)
    out = tuple(int(s) for s in size)
    for s in out:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(out)}")
    return out


# -- COO ------------------------------------------------------------------------------------------

def check_coo(indices: Tensor, values: Tensor, shape: tuple) -> None:
    """PyTorch's _validate_sparse_coo_tensor_args (Note [Sparse invariants]), in its order."""
    if values.ndim == 0:
        raise RuntimeError("values must have at least one dimension (nnz)")
    sdim = indices._shape[0] if indices.ndim else 0
    ddim = values.ndim - 1
    if len(shape) != sdim + ddim:
        raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(shape)}, "
                           f"sparse_dim = {sdim}, dense_dim = {ddim}")
    if indices.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices._shape)}")
    nnz = indices._shape[1]
    if values._shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, nnz from "
                           f"values: {values._shape[0]}")
    if tuple(values._shape[1:]) != tuple(shape[sdim:]):
        raise RuntimeError(f"values has incorrect size, expected {[nnz, *shape[sdim:]]}, got {list(values._shape)}")
    if nnz == 0:
        return
    low = indices.amin(1).tolist()
    high = indices.amax(1).tolist()
    for d in range(sdim):
        if low[d] < 0:
            raise RuntimeError(f"found negative index {low[d]} for dim {d}")
        if high[d] >= shape[d]:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {shape[d]} but found "
                               f"index {high[d]}")


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None) -> Tensor:
    """``torch.sparse_coo_tensor``: a COO tensor from its indices (sparse_dim x nnz) and values."""
    if isinstance(values, Tensor) and dtype is None:
        dtype = values.dtype
    values = as_values_tensor(values, dtype, device)
    indices = as_index_tensor(indices, "indices").to(values._device)
    shape = _sizes(size)
    if shape is None:
        if indices.ndim != 2:
            raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices._shape)}")
        sdim, nnz = indices._shape
        if nnz and int(indices.amin()) < 0:
            low = indices.amin(1).tolist()
            d = next(i for i, v in enumerate(low) if v < 0)
            raise RuntimeError(f"found negative index {low[d]} for dim {d}")
        sparse_sizes = indices.amax(1).add(1).tolist() if nnz else [0] * sdim
        shape = tuple(sparse_sizes) + tuple(values._shape[1:])
    check_coo(indices, values, shape)
    out = coo_from_members_op(indices, values, list(shape), bool(is_coalesced))
    if is_coalesced:
        from ._convert import coalesce

        # Trust is not enough for a kernel that relies on it: verify (cheap when it is true).
        if coalesce(out)._nnz() != out._nnz():
            raise RuntimeError("sparse_coo_tensor: is_coalesced=True but the indices are not coalesced")
    if requires_grad:
        out.requires_grad_(True)
    return out


# -- compressed layouts -----------------------------------------------------------------------

def check_compressed(layout, compressed: Tensor, plain: Tensor, values: Tensor, shape: tuple) -> None:
    """The compressed-layout invariants (Note [Sparse invariants]), PyTorch's messages."""
    cname, pname = _COMPRESSED_NAMES[layout]
    if compressed.ndim != 1 or plain.ndim != 1:
        raise RuntimeError(f"{cname} and {pname} must be 1-dimensional (batched compressed tensors are not "
                           f"supported), got {compressed.ndim} and {plain.ndim} dimensions")
    block = layout in (sparse_bsr, sparse_bsc)
    base = 3 if block else 1
    if values.ndim < base:
        raise RuntimeError(f"values must have at least {base} dimensions, got {values.ndim}")
    if len(shape) < 2:
        raise RuntimeError(f"size must have at least 2 dimensions, got {len(shape)}")
    dense = tuple(values._shape[base:])
    if len(shape) != 2 + len(dense) or tuple(shape[2:]) != dense:
        raise RuntimeError(f"values dense dimensions {list(dense)} do not match size {list(shape)}")
    if values._shape[0] != plain._shape[0]:
        raise RuntimeError(f"{pname} and values must have the same number of elements, but got "
                           f"{plain._shape[0]} and {values._shape[0]}")
    rows, cols = shape[0], shape[1]
    if block:
        bh, bw = values._shape[1], values._shape[2]
        if bh <= 0 or bw <= 0 or rows % bh or cols % bw:
            raise RuntimeError(f"tensor shape[0] and shape[1] ({rows}, {cols}) must be divisible by blocksize "
                               f"({bh}, {bw})")
        rows, cols = rows // bh, cols // bw
    if layout in (sparse_csc, sparse_bsc):
        rows, cols = cols, rows
    bad = _C.sparse_check_compressed(compressed, plain, rows, cols, cname, pname)
    if bad:
        raise RuntimeError(bad)


def sparse_compressed_tensor(compressed_indices, plain_indices, values, size=None, *, dtype=None, layout=None,
                             device=None, pin_memory=False, requires_grad=False, check_invariants=None) -> Tensor:
    """``torch.sparse_compressed_tensor``: CSR, CSC, BSR or BSC from pointers, indices and values."""
    if layout not in COMPRESSED:
        raise TypeError(f"sparse_compressed_tensor expects a compressed layout, got {layout}")
    if isinstance(values, Tensor) and dtype is None:
        dtype = values.dtype
    values = as_values_tensor(values, dtype, device)
    cname, pname = _COMPRESSED_NAMES[layout]
    compressed = as_index_tensor(compressed_indices, cname).to(values._device)
    plain = as_index_tensor(plain_indices, pname).to(values._device)
    shape = _sizes(size)
    block = layout in (sparse_bsr, sparse_bsc)
    if shape is None:
        if values.ndim < (3 if block else 1):
            raise RuntimeError("values has too few dimensions for the layout")
        bh, bw = (values._shape[1], values._shape[2]) if block else (1, 1)
        n_compressed = max(compressed.numel() - 1, 0)
        n_plain = int(plain.amax()) + 1 if plain.numel() else 0
        if layout in (sparse_csr, sparse_bsr):
            shape = (n_compressed * bh, n_plain * bw)
        else:
            shape = (n_plain * bh, n_compressed * bw)
        shape += tuple(values._shape[3 if block else 1:])
    check_compressed(layout, compressed, plain, values, shape)
    out = compressed_from_members_op(compressed.contiguous(), plain.contiguous(), values, list(shape), layout)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _compressed_factory(layout):
    def factory(compressed_indices, plain_indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                requires_grad=False, check_invariants=None):
        return sparse_compressed_tensor(compressed_indices, plain_indices, values, size, dtype=dtype, layout=layout,
                                        device=device, requires_grad=requires_grad)

    factory.__name__ = factory.__qualname__ = f"sparse_{layout.name[7:]}_tensor"  # pickled by name
    factory.__doc__ = f"``torch.{factory.__name__}``: a {layout.name[7:].upper()} tensor."
    return factory


sparse_csr_tensor = _compressed_factory(sparse_csr)
sparse_csc_tensor = _compressed_factory(sparse_csc)
sparse_bsr_tensor = _compressed_factory(sparse_bsr)
sparse_bsc_tensor = _compressed_factory(sparse_bsc)


class check_sparse_tensor_invariants:  # noqa: N801  (PyTorch's name)
    """``torch.sparse.check_sparse_tensor_invariants``: a context manager and decorator that turns
    the invariant checks on. ember always checks (Note [Sparse invariants]); the switch is kept so
    that programs reading or setting it run unchanged."""

    _enabled = [False]

    @staticmethod
    def is_enabled() -> bool:
        return check_sparse_tensor_invariants._enabled[0]

    @staticmethod
    def enable() -> None:
        check_sparse_tensor_invariants._enabled[0] = True

    @staticmethod
    def disable() -> None:
        check_sparse_tensor_invariants._enabled[0] = False

    def __init__(self, enable: bool = True):
        self.state = bool(enable)
        self.saved = None

    def __enter__(self):
        self.saved = self._enabled[0]
        self._enabled[0] = self.state
        return self

    def __exit__(self, *exc):
        self._enabled[0] = self.saved
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with check_sparse_tensor_invariants(self.state):
                return fn(*args, **kwargs)

        return wrapper


def reduce_sparse(t: Tensor):
    """Pickle support for sparse tensors (multiprocessing, copy): the members, rebuilt and checked
    by the constructors."""
    if t._layout is sparse_coo:
        members = (t._sp_indices.detach(), t._sp_values.detach())
        extra = t._coalesced
    else:
        members = (t._compressed, t._plain, t._sp_values.detach())
        extra = None
    return (_rebuild_sparse, (t._layout.name, members, tuple(t._shape), extra, t._requires_grad))


def _rebuild_sparse(layout_name: str, members: tuple, shape: tuple, extra, requires_grad: bool) -> Tensor:
    from ..layouts import LAYOUTS

    layout = LAYOUTS[layout_name]
    if layout is sparse_coo:
        out = sparse_coo_tensor(members[0], members[1], shape, is_coalesced=extra or None)
    else:
        out = sparse_compressed_tensor(*members, shape, layout=layout)
    return out.requires_grad_(requires_grad) if requires_grad else out
