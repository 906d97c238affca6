"""In-place variants PyTorch has beside its out-of-place ops, and their top-level ``torch.<name>_`` forms.

Three ways to write into ``self``, chosen so that autograd records each as PyTorch does:

- an in-place op of its own (``cumsum_``, ``sgn_``, ...): declared here from the out-of-place op;
  the recording then finds the out-of-place derivative (``CumsumBackward0``) as for ``exp_``;
- an existing in-place op (``mul_``, ``masked_fill_``, ``index_put_``, ``scatter_reduce_``, ...);
- ``_write_back``: a composite result copied in with ``copy_`` (its gradient flows through the
  composite, computed from a copy of ``self`` when autograd records, so that what the composite
  saved is not overwritten).

View ops in place (``t_``, ``squeeze_``, ``as_strided_``, ...) change only ``self``'s geometry: the
view op runs out of place and ``self`` takes the view's metadata and history (``_become``).
"""

from __future__ import annotations

import math

from .. import dtypes, grad_mode
from .._native import _C
from ..device import META
from ..dispatch import OPS, define
from ..optable import declare
from ..shapes import as_shape, contiguous_strides, numel, wrap_dim
from ..tensor import Tensor, make_tensor
from ._common import fresh_result, label_as_op, type_meta_name, type_name, write_out
from .indexing import gather_scatter as _gather_scatter
from .indexing import subscripts as _subscripts
from .linalg import products as _matrix_products
from .nn import embedding_dropout as _embedding_dropout
from .pointwise import complex as _complex_numbers
from .pointwise import elementwise
from .reduction import composite as _composite_reductions
from .shape import reorder as _reorder
from .shape import views

LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_OF_LEAF_INPLACE = "a view of a leaf Variable that requires grad is being used in an in-place operation."


def _check_result(self: Tensor, result: Tensor) -> None:
    """PyTorch's checks of an in-place result: castable to self's dtype and of self's shape."""
    if not dtypes.can_cast(result.dtype, self.dtype):
        raise RuntimeError(f"result type {type_name(result.dtype)} can't be cast to the desired output type "
                           f"{type_name(self.dtype)}")
    if result._shape != self._shape:
        raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast shape "
                           f"{list(result._shape)}")


def _recording(*tensors) -> bool:
    """Whether autograd records an op on these operands (any of them requiring grad)."""
    return grad_mode.STATE.grad_enabled and any(isinstance(t, Tensor) and t._requires_grad for t in tensors)


def _recorded_source(self: Tensor) -> Tensor:
    """A copy of self for a composite that autograd records: what the composite saves for backward
    must not be the memory that copy_ then overwrites."""
    return views.clone_op(_detached_alias(self))


def _write_back(self: Tensor, compute, *others) -> Tensor:
    """``self.copy_(compute(self))`` after PyTorch's result checks; ``others``: the composite's other
    operands (when one requires grad, the composite may save self for its gradient)."""
    if not isinstance(self, Tensor):
        raise TypeError(f"expected a Tensor as self, got {type(self).__name__}")
    result = compute(_recorded_source(self) if _recording(self, *others) else self)
    _check_result(self, result)
    return views.copy_inplace_op(self, result)


# -- in-place ops declared from their out-of-place op ----------------------------------------------

def _declare_inplace(oop):
    """``<name>_``: runs ``oop``'s kernel and writes the result into self (one version bump)."""
    schema = oop.schema.replace("(Tensor self", "(Tensor(a!) self", 1).rsplit("->", 1)[0] + "-> Tensor(a!)"
    op = define(oop.name + "_" + schema[len(oop.name):], ("inplace",))

    def kernel(self, *args, **kwargs):
        result = oop.call_kernel((self,) + args, kwargs)
        _check_result(self, result)
        if self._device is not META:
            _C.copy_(self, result)
            self._bump_version()
        return self

    op.kernels["cpu"] = op.kernels["meta"] = op.meta = kernel
    return op


cumsum_inplace_op = _declare_inplace(_composite_reductions.cumsum_op)
cumprod_inplace_op = _declare_inplace(_composite_reductions.cumprod_op)
sgn_inplace_op = _declare_inplace(_complex_numbers.sgn_op)
conj_physical_inplace_op = _declare_inplace(_complex_numbers.conj_physical_op)


def _scan_(name, op):
    def method(self, dim, *, dtype=None):
        if dtype is not None and dtypes.to_dtype(dtype) is not self.dtype:
            raise RuntimeError(f"Bad in-place call: input tensor dtype {type_meta_name(self.dtype)} and output tensor "
                               f"dtype {type_meta_name(dtypes.to_dtype(dtype))} should match")
        if self.dtype is dtypes.bool:
            raise NotImplementedError(f"\"{name}_out_cpu\" not implemented for 'Bool'")
        return op(self, dim)

    method.__name__ = name + "_"
    return method


cumsum_ = _scan_("cumsum", cumsum_inplace_op)
cumprod_ = _scan_("cumprod", cumprod_inplace_op)


def sgn_(self):
    _complex_numbers._tensor_check(self, "sgn")
    return sgn_inplace_op(self)


def conj_physical_(input):
    _complex_numbers._tensor_check(input, "conj_physical")
    return conj_physical_inplace_op(input)


def nextafter_(self, other):
    return OPS["nextafter_"](self, other)


# -- pointwise composites ----------------------------------------------------------------------------

clamp_ = clip_ = elementwise.clamp_


def clamp_min_(input, min):  # noqa: A002
    return clamp_(input, min=min)


def clamp_max_(input, max):  # noqa: A002
    return clamp_(input, max=max)


def deg2rad_(input):
    return elementwise.mul_inplace_op(input, math.pi / 180.0)


def rad2deg_(input):
    return elementwise.mul_inplace_op(input, 180.0 / math.pi)


def float_power_(self, exponent):
    complex_result = self.dtype.is_complex or isinstance(exponent, complex) or (
        isinstance(exponent, Tensor) and exponent.dtype.is_complex)
    result = dtypes.complex128 if complex_result else dtypes.float64
    if self.dtype is not result:
        raise RuntimeError(f"the base given to float_power_ has dtype {type_name(self.dtype)} but the operation's "
                           f"result requires dtype {type_name(result)}")
    exponent = exponent.to(result) if isinstance(exponent, Tensor) else (complex if complex_result else float)(exponent)
    return elementwise.pow_inplace_op(self, exponent)


def _tri_(name: str, lower: bool):
    def method(self, diagonal=0):
        diagonal = _reorder.tri_diagonal(diagonal, name + "_")
        if self.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        keep = _reorder._tri_mask(self, diagonal, lower)
        return _subscripts.masked_fill_(self, elementwise.logical_not(keep), False if self.dtype is dtypes.bool else 0)

    method.__name__ = name + "_"
    return method


tril_ = _tri_("tril", True)
triu_ = _tri_("triu", False)


def addr_(self, vec1, vec2, *, beta=1, alpha=1):
    if self.ndim != 2:
        raise RuntimeError(f"2D tensor expected, got {self.ndim}D tensor for input")
    return _write_back(self, lambda x: _matrix_products.addr(x, vec1, vec2, beta=beta, alpha=alpha), vec1, vec2)


def _renorm_check(input, p, dim, maxnorm) -> int:
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    d = wrap_dim(dim, input.ndim)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {type_name(input.dtype)}")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    return d


def renorm(input, p, dim, maxnorm, *, out=None):
    """Each slice along ``dim`` scaled down to p-norm ``maxnorm`` where its norm exceeds it."""
    d = _renorm_check(input, p, dim, maxnorm)
    others = tuple(i for i in range(input.ndim) if i != d)
    norms = _composite_reductions.norm(input, p, others, keepdim=True)
    factor = elementwise.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return write_out(elementwise.mul(input, factor.to(norms.dtype)), out)


def renorm_(self, p, dim, maxnorm):
    _renorm_check(self, p, dim, maxnorm)
    return _write_back(self, lambda x: renorm(x, p, dim, maxnorm))


# -- indexing -----------------------------------------------------------------------------------------

def put_(self, index, source, accumulate=False):
    """Writes ``source`` at the flat (row-major) positions ``index`` of self, whatever its strides."""
    if not isinstance(index, Tensor) or index.dtype is not dtypes.int64:
        got = type_name(index.dtype) if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {got}")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{type_name(self.dtype)} and source.dtype = {type_name(source.dtype)}")
    if source.numel() != index.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    n = self.numel()
    flat = views.reshape(index, (-1,))
    if flat.numel() and self._device is not META:
        lo, hi = flat.min().item(), flat.max().item()
        if hi >= n or lo < -n:
            raise IndexError(f"out of range: tried to access index {hi if hi >= n else lo} on a tensor of {n} "
                             f"elements.")
        flat = elementwise.where(flat < 0, flat + n, flat)
    target = views.view_op(self, (1,)) if self.ndim == 0 else self
    coords = []
    for size in reversed(target._shape):  # unravel: the last dim varies fastest
        coords.append(elementwise.remainder(flat, size))
        flat = elementwise.floor_divide(flat, size)
    _subscripts.index_put_(target, tuple(reversed(coords)), views.reshape(source, (-1,)), bool(accumulate))
    return self


def put(input, index, source, accumulate=False):
    return fresh_result(put_(views.clone_op(input), index, source, accumulate))


_INDEX_REDUCE = ("prod", "mean", "amax", "amin")


def index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    """Reduces the slices of ``source`` into self's slices ``index`` along ``dim`` (a scatter_reduce_
    with the index laid along dim)."""
    if reduce not in _INDEX_REDUCE:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got "
                           f"{reduce}.")
    d = wrap_dim(dim, max(self.ndim, 1))
    _gather_scatter._check_index_vector("index_reduce_", index)
    if index.dtype not in (dtypes.int64, dtypes.int32):
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: "
                           f"{type_name(index.dtype)}")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"index_reduce_(): self ({type_name(self.dtype)}) and source ({type_name(source.dtype)}) "
                           "must have the same scalar type")
    _gather_scatter._check_source("index_reduce_", self, d, index, source)
    if index.numel() and self._device is not META:
        size = self._shape[d] if self.ndim else 1
        if index.min().item() < 0 or index.max().item() >= size:
            raise IndexError("index out of range in self")
    expanded = _gather_scatter._expanded_index(index, d, source._shape)
    return _gather_scatter.scatter_reduce_(self, d, expanded, source, reduce, include_self=include_self)


def index_reduce(input, dim, index, source, reduce, *, include_self=True, out=None):
    result = index_reduce_(views.clone_op(input), dim, index, source, reduce, include_self=include_self)
    return write_out(fresh_result(result), out)


def _fill_diagonal(t: Tensor, fill_value, wrap: bool) -> Tensor:
    height, width = t._shape[0], t._shape[1]
    size = min(height, width)
    step = sum(t._stride)
    views.fill_(views.as_strided_op(t, (size,), (step,), t._offset), fill_value)
    if wrap and t.ndim == 2 and height > width + 1:
        n_wrap = (t.numel() + width) // (width + 1) - size
        start = t._offset + t._stride[0] * (width + 1)
        views.fill_(views.as_strided_op(t, (n_wrap,), (step,), start), fill_value)
    return t


def fill_diagonal_(self, fill_value, wrap=False):
    """Fills the main diagonal (all indices equal); with ``wrap``, a tall matrix's diagonal restarts
    every ``cols + 1`` rows, as NumPy's fill_diagonal (PyTorch's storage-stride walk)."""
    if self.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if self.ndim > 2 and any(s != self._shape[0] for s in self._shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    if _recording(self):
        # Through copy_, so that self (maybe a view) gets its history as from any in-place op.
        return _write_back(self, lambda src: _fill_diagonal(src, fill_value, wrap))
    return _fill_diagonal(self, fill_value, wrap)


# -- view ops in place: self takes the view's geometry and history -------------------------------------

def _check_view_inplace(self: Tensor) -> None:
    """The leaf checks autograd makes for any in-place op (the view op itself runs out of place)."""
    if not grad_mode.STATE.grad_enabled:
        return
    if self._requires_grad and self.grad_fn is None:
        raise RuntimeError(LEAF_INPLACE)
    base = self._base
    if base is not None and base._requires_grad and base.grad_fn is None:
        raise RuntimeError(VIEW_OF_LEAF_INPLACE)


def _shadow(self: Tensor) -> Tensor:
    """self with its history over a storage object of its own (the same memory, another version
    counter), for a node that saves it only for its geometry."""
    st = self._storage
    if st.device_type == "meta":
        own = _C.Storage.meta(st.nbytes())
    elif st.device_type == "cpu":
        own = _C.Storage.borrow(st.data_ptr(), st.nbytes(), st)
    else:
        return self
    alias = make_tensor(own, self._shape, self._stride, self._offset, self.dtype, self._device)
    alias.grad_fn, alias._requires_grad, alias._autograd_meta = self.grad_fn, self._requires_grad, self._autograd_meta
    return alias


def _detached_alias(self: Tensor) -> Tensor:
    """self's elements with a history that bumping self's version counter leaves valid: the version
    is shared with self's base, which self's own view node may have saved (PyTorch's view nodes
    save sizes only). A view is read out of its base, as PyTorch regenerates a view's history."""
    base = self._base
    if base is None or not base._requires_grad:
        return _shadow(self)
    return views.as_strided_op(_shadow(base), self._shape, self._stride, self._offset)


def _become(self: Tensor, view_fn, node_label: str | None = None) -> Tensor:
    """Gives self the geometry (and history) of ``view_fn(self)``; ``node_label`` names the new node
    as PyTorch's in-place overload (squeeze_(dim): SqueezeBackward4, transpose_: TransposeBackward1)."""
    _check_view_inplace(self)
    view = view_fn(_detached_alias(self) if _recording(self) else self)
    self._shape, self._stride, self._offset = view._shape, view._stride, view._offset
    fn = view.grad_fn  # read while current: a view made under no_grad would raise once stale
    self._bump_version()  # before the new history is set: it is current (Note [Stale view histories])
    if fn is not None:  # the view's node reads self's old history: self's new one
        self.grad_fn = fn
        self._requires_grad = True
        meta = self._autograd_meta
        if meta is not None:
            meta.output_nr = 0
            if meta.retains_grad:
                self.retain_grad()  # its .grad: the gradient of its new geometry
        if node_label is not None:
            label_as_op(self, node_label)
    return self


def t_(self):
    if self.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    # Below 2 dims t() is an unrecorded alias: alias_op, so that self still gets a history of its own.
    return _become(self, views.t if self.ndim == 2 else views.alias_op, "t_" if self.ndim == 2 else None)


def transpose_(self, dim0, dim1):
    return _become(self, lambda x: views.transpose(x, dim0, dim1), "transpose_")


swapdims_ = swapaxes_ = transpose_


def squeeze_(self, dim=None):
    label = "squeeze_all_" if dim is None else "squeeze_dim_" if isinstance(dim, int) else "squeeze_dims_"
    return _become(self, lambda x: views.squeeze(x, dim), label)


def unsqueeze_(self, dim):
    return _become(self, lambda x: views.unsqueeze(x, dim), "unsqueeze_")


def as_strided_(self, size, stride, storage_offset=None):
    return _become(self, lambda x: views.as_strided_op(x, size, stride, storage_offset), "as_strided_")


# -- resize ---------------------------------------------------------------------------------------------

def resize_(self, *sizes, memory_format=None):
    """New shape with contiguous strides at the same storage offset; the storage grows (keeping its
    bytes; new elements are zero) when too small. Refused for tensors that require grad, as PyTorch."""
    if self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    shape = as_shape(sizes)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    if shape == self._shape:
        return self  # PyTorch returns before touching anything (no version bump)
    needed = (self._offset + numel(shape)) * self.dtype.itemsize if numel(shape) else 0
    old = self._storage
    if needed > old.nbytes():
        from ..interop import is_resizable

        if not is_resizable(old):
            raise RuntimeError("Trying to resize storage that is not resizable")
        # A new, larger storage holding the old bytes (PyTorch reallocates the storage in place, which
        # other tensors on it then see; here they keep the old one).
        if self._device is META:
            grown = _C.Storage.meta(needed)
        else:
            grown = _C.Storage.allocate(needed, True)
            kept = make_tensor(grown, (old.nbytes(),), (1,), 0, dtypes.uint8, self._device)
            _C.copy_(kept, make_tensor(old, (old.nbytes(),), (1,), 0, dtypes.uint8, self._device))
        _C._keep_version_counter(self)  # the tensor keeps its counter on the new storage
        self._storage, self._base = grown, None
    self._shape, self._stride = shape, contiguous_strides(shape)
    self._bump_version()
    return self


def resize_as_(input, the_template, *, memory_format=None):
    return resize_(input, the_template._shape, memory_format=memory_format)


# -- top-level forms PyTorch has of nn in-place ops and dropouts ----------------------------------------

def celu_(input, alpha=1.0):
    return elementwise.celu(input, alpha, inplace=True)


def selu_(input):
    return elementwise.selu(input, inplace=True)


def threshold_(input, threshold, value):
    return elementwise.threshold(input, threshold, value, inplace=True)


def _rrelu(input, lower, upper, training, generator, inplace):
    """Leaky ReLU with slope (lower + upper) / 2, or in training one slope per element drawn
    from U(lower, upper), as PyTorch's noise tensor."""
    if not inplace:
        # PyTorch's rrelu allocates a contiguous result whatever the input's strides.
        input = input.contiguous()
    if not training:
        return elementwise.leaky_relu(input, (lower + upper) / 2, inplace)
    slope = views.new_empty(input, input._shape).uniform_(lower, upper, generator=generator)
    noise = elementwise.where(input > 0, 1.0, slope)
    # mul_ rather than copy_: backward then needs only the noise, not the overwritten input.
    return elementwise.mul_inplace_op(input, noise) if inplace else elementwise.mul(input, noise)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return _rrelu(input, lower, upper, training, generator, False)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return _rrelu(input, lower, upper, training, generator, True)


def dropout_(input, p=0.5, train=True):
    return _embedding_dropout.dropout(input, p, train, inplace=True)


def feature_dropout_(input, p=0.5, train=True):
    return _embedding_dropout.feature_dropout(input, p, train, inplace=True)


def alpha_dropout_(input, p=0.5, train=True):
    return _embedding_dropout.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input, p=0.5, train=True):
    return _embedding_dropout.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p=0.5, train=True):
    return _embedding_dropout.feature_alpha_dropout(input, p, train, inplace=True)


def embedding_renorm_(input, indices, max_norm, norm_type):
    """Rescales in place the rows of ``input`` that ``indices`` names whose norm exceeds max_norm."""
    if grad_mode.STATE.grad_enabled and input._requires_grad:
        if input.grad_fn is None:
            raise RuntimeError(LEAF_INPLACE)
        # The rescale is not recorded: letting the gradient pass through unchanged would be a silent
        # wrong answer, so refuse as PyTorch does (nn.Embedding renorms under no_grad).
        raise NotImplementedError("the derivative for 'embedding_renorm' is not implemented.")
    _embedding_dropout._renorm_(input, indices, float(max_norm), float(norm_type))
    return input


def fill(input, value):
    return fresh_result(views.fill_(views.clone_op(input), value))


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
addr_                       method
alpha_dropout_              function
as_strided_                 function method
celu_                       function method=elementwise.celu_inplace_op
clamp_max_                  function method
clamp_min_                  function method
clip_                       function method
conj_physical_              function method
cumprod_                    method
cumsum_                     method
deg2rad_                    function method
dropout_                    function
embedding_renorm_           function
feature_alpha_dropout       function
feature_alpha_dropout_      function
feature_dropout_            function
fill                        function
fill_diagonal_              method
float_power_                method
index_reduce                function method
index_reduce_               method
nextafter_                  method
put                         function method
put_                        method
rad2deg_                    function method
renorm                      function method
renorm_                     method
resize_                     method
resize_as_                  function method
rrelu                       function
rrelu_                      function
selu_                       function method=elementwise.selu_inplace_op
sgn_                        method
squeeze_                    method
t_                          method
threshold_                  function method=elementwise.threshold_inplace_op
transpose_                  method alias=swapaxes_,swapdims_
tril_                       method
triu_                       method
unsqueeze_                  method
""")
