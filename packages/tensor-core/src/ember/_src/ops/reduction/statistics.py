"""Statistics and differences: ``diff``, ``quantile``/``nanquantile``, ``cov``/``corrcoef``,
``histogram``, ``dist``, ``pdist`` (compositions of sort, gather, lerp, matmul, searchsorted and
bincount, so the differentiable ones get their gradients from those ops) and ``logcumsumexp``
(one native scan, ``_C.logcumsumexp_``, whose derivative is in ember-autograd).
"""

from __future__ import annotations

import warnings

from ... import dtypes
from ..._native import _C
from ...autocast import composite as _autocast_composite
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import numel, wrap_dim
from ...tensor import Tensor
from .._common import compute_dtype, convert, empty, label_as_op, return_type, type_name, write_out
from ..creation import factories
from ..indexing.gather_scatter import gather
from ..indexing.indices import triu_indices
from ..indexing.sorting import bincount, searchsorted, sort
from ..indexing.subscripts import index_select
from ..linalg.products import mm
from ..pointwise import elementwise
from ..shape import joining, views
from . import reduce as reductions

histogram_result = return_type("histogram", ["hist", "bin_edges"])


def _check_tensor(x, fn: str, arg: str = "input", pos: int = 1) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")


# -- diff -------------------------------------------------------------------------------------------

def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None, append: Tensor | None = None,
         *, out=None) -> Tensor:
    """n-th forward difference along ``dim``, after concatenating ``prepend`` and ``append``."""
    _check_tensor(input, "diff")
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is not None and not isinstance(extra, Tensor):
            raise TypeError(f"diff(): argument '{name}' must be Tensor, not {type(extra).__name__}")
        if extra is not None and extra.ndim != input.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = wrap_dim(dim, input.ndim)
    x = input
    if n > 0 and (prepend is not None or append is not None):  # n == 0 copies input alone
        x = joining.cat([t for t in (prepend, input, append) if t is not None], d)
    for _ in range(n):
        length = x._shape[d]
        if length == 0:
            break
        hi, lo = views.narrow(x, d, 1, length - 1), views.narrow(x, d, 0, length - 1)
        x = elementwise.logical_xor(hi, lo) if x.dtype is dtypes.bool else elementwise.sub(hi, lo)
    if x is input:
        x = x.clone()
    return write_out(x, out)


# -- quantile ---------------------------------------------------------------------------------------

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan: bool, fn: str):
    _check_tensor(input, fn)
    if input.dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError("quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    scalar_q = not isinstance(q, Tensor)
    if scalar_q:
        if not isinstance(q, (int, float)) or isinstance(q, bool):
            raise TypeError(f"{fn}(): argument 'q' must be float or Tensor, not {type(q).__name__}")
        if not 0 <= q <= 1:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q:g}")  # C++ stream format
        q = factories.scalar_tensor(float(q), dtype=input.dtype, device=input._device)
    else:
        if q.ndim > 1:
            raise RuntimeError("quantile() q must be a scalar or 1D tensor")
        if q.dtype is not input.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        in_range = elementwise.logical_and(elementwise.ge(q, 0), elementwise.le(q, 1))
        if numel(q._shape) and not bool(reductions.all(in_range)):
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
        scalar_q = q.ndim == 0
    if numel(input._shape) == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if dim is None:
        rows = views.reshape(input, (-1,))
        kept = (1,) * input.ndim if keepdim else ()
    else:
        d = wrap_dim(dim, max(input.ndim, 1))
        rows = views.movedim(input, d, -1) if input.ndim else views.reshape(input, (1,))
        kept = input._shape[:d] + ((1,) if keepdim and input.ndim else ()) + input._shape[d + 1:]
    q = q.detach()

    ranked = sort(rows, -1)[0]  # NaN sorts last
    batch = ranked._shape[:-1]
    length = ranked._shape[-1]
    qs = views.reshape(q, (1,) * len(batch) + (numel(q._shape),))
    with_nan = elementwise.isnan(views.narrow(ranked.detach(), -1, length - 1, 1))
    if ignore_nan:
        valid = reductions.sum(elementwise.logical_not(elementwise.isnan(ranked.detach())), -1, True)
        ranks = elementwise.clamp(elementwise.mul(qs, elementwise.sub(valid, 1)), min=0)
    else:
        ranks = elementwise.where(with_nan, float(length - 1), elementwise.mul(qs, length - 1))
    if interpolation == "lower":
        ranks = elementwise.floor(ranks)
    elif interpolation == "higher":
        ranks = elementwise.ceil(ranks)
    elif interpolation == "nearest":
        ranks = elementwise.round(ranks)
    below = ranks.to(dtypes.int64)
    shape = batch + (numel(q._shape),)

    result = gather(ranked, -1, views.expand(below, shape) if below._shape != shape else below)
    if interpolation in ("linear", "midpoint"):
        weights = factories.full_like(ranks, 0.5) if interpolation == "midpoint" else elementwise.sub(ranks, below)
        above = views.expand(elementwise.ceil(ranks).to(dtypes.int64), shape)
        result = elementwise.lerp(result, gather(ranked, -1, above), views.expand(weights, shape).to(input.dtype))
    result = views.movedim(result, -1, 0)  # (nq, ...)
    result = views.reshape(result, (result._shape[0],) + kept)
    return views.select(result, 0, 0) if scalar_q else result


@_autocast_composite("fp32")
def quantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *, interpolation: str = "linear",
             out=None) -> Tensor:
    """The q-th quantiles of input along ``dim`` (flattened when None); NaN if a row holds NaN."""
    return write_out(_quantile(input, q, dim, keepdim, interpolation, False, "quantile"), out)


@_autocast_composite("fp32")
def nanquantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *, interpolation: str = "linear",
                out=None) -> Tensor:
    """quantile ignoring NaN values (NaN only where a whole row is NaN)."""
    return write_out(_quantile(input, q, dim, keepdim, interpolation, True, "nanquantile"), out)


# -- cov / corrcoef ---------------------------------------------------------------------------------

def _check_weights(w, name: str, observations: int, integral: bool) -> None:
    if not isinstance(w, Tensor):
        raise TypeError(f"cov(): argument '{name}' must be Tensor, not {type(w).__name__}")
    if w.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                           f"{w.ndim} dimensions")
    if numel(w._shape) != observations:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the "
                           f"input but got {numel(w._shape)} != {observations}")
    if integral and (w.dtype.is_floating_point or w.dtype.is_complex):
        raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                           f"{type_name(w.dtype)} dtype")
    if not integral and not w.dtype.is_floating_point:
        raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                           f"{type_name(w.dtype)} dtype")
    if numel(w._shape) and bool(reductions.any(elementwise.lt(w.detach(), 0))):
        raise RuntimeError(f"cov(): {name} cannot be negative")


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """Covariance matrix of the variables in input's rows (observations in columns)."""
    _check_tensor(input, "cov")
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = input if input.ndim == 2 else views.reshape(input, (1, -1))
    observations = x._shape[1]
    w = None
    if fweights is not None:
        _check_weights(fweights, "fweights", observations, True)
        w = fweights
    if aweights is not None:
        _check_weights(aweights, "aweights", observations, False)
        w = aweights if w is None else elementwise.mul(w, aweights)
    if w is not None:
        w = views.reshape(w, (-1,))
        w_sum = reductions.sum(w)
        avg = elementwise.div(reductions.sum(elementwise.mul(x, w), 1), w_sum)
    else:
        w_sum = observations
        avg = reductions.mean(
            x if x.dtype.is_floating_point or x.dtype.is_complex else x.to(dtypes.get_default_dtype()), 1
        )
    if w is not None and correction != 0:
        norm = (
            elementwise.sub(
                w_sum,
                elementwise.div(
                    elementwise.mul(reductions.sum(elementwise.mul(w, aweights)), correction), w_sum
                ),
            )
            if aweights is not None
            else elementwise.sub(w_sum, correction)
        )
    elif w is not None:
        norm = w_sum
    else:
        norm = observations - correction
    norm_value = float(norm) if isinstance(norm, Tensor) else norm
    if norm_value <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=2)
        norm = elementwise.mul(norm, 0) if isinstance(norm, Tensor) else 0
    centered = elementwise.sub(x, views.unsqueeze(avg, 1))
    weighted = centered if w is None else elementwise.mul(centered, w)

    c = mm(centered, views.t(weighted).conj())
    return views.squeeze(elementwise.div(c, norm))


def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the variables in input's rows."""
    _check_tensor(input, "corrcoef")
    if input.ndim > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    c = cov(input)
    if c.ndim == 0:
        return elementwise.div(c, c)  # 1, or NaN for a constant variable
    std = elementwise.sqrt(views.diagonal(c))
    c = elementwise.div(elementwise.div(c, views.unsqueeze(std, 1)), views.unsqueeze(std, 0))
    return c if c.dtype.is_complex else elementwise.clamp(c, -1, 1)


# -- distances --------------------------------------------------------------------------------------

def dist(input: Tensor, other: Tensor, p=2) -> Tensor:
    """The p-norm of input - other (broadcast)."""
    _check_tensor(input, "dist")
    _check_tensor(other, "dist", "other", 2)
    from ....linalg import vector_norm

    promoted = dtypes.result_type_of(input, other)
    if not (promoted.is_floating_point or promoted.is_complex):
        raise RuntimeError(f"norm(): input dtype should be either floating point or complex. Got "
                           f"{type_name(promoted)} instead.")
    return label_as_op(vector_norm(elementwise.sub(input, other), p), "dist")


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """p-norm distances between every pair of rows i < j of a (N, M) input, as a vector."""
    _check_tensor(input, "pdist")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    from ....linalg import vector_norm

    rows, cols = triu_indices(input._shape[0], input._shape[0], 1, device=input._device)

    return vector_norm(elementwise.sub(index_select(input, 0, rows), index_select(input, 0, cols)), p, dim=-1)


# -- histogram --------------------------------------------------------------------------------------

def histogram(input: Tensor, bins=100, *, range=None, weight: Tensor | None = None,  # noqa: A002
              density: bool = False, out=None):
    """Histogram of input's values: (hist, bin_edges); ``bins`` is a count or the edges."""
    _check_tensor(input, "histogram")
    _cpu_only(input, "histogram.bin_ct" if isinstance(bins, int) else "histogram.bins_tensor")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{type_name(input.dtype)}'")
    if weight is not None:
        if weight.dtype is not input.dtype:
            raise RuntimeError(f"torch.histogramdd: if weight tensor is provided, input tensor and weight tensor "
                               f"should have the same dtype, but got input({type_name(input.dtype)}), and "
                               f"weight({type_name(weight.dtype)})")
        if weight._shape != input._shape:
            raise RuntimeError(f"torch.histogramdd: if weight tensor is provided it should have the same shape as "
                               f"the input tensor excluding its innermost dimension, but got input with shape "
                               f"{list(input._shape)} and weight with shape {list(weight._shape)}")
    x = views.reshape(input.detach(), (-1,))
    if isinstance(bins, Tensor):
        if range is not None:
            raise TypeError("histogram(): argument 'range' is not allowed with a Tensor 'bins'")
        if bins.dtype is not input.dtype:
            raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have the same dtype, but "
                               f"got input with dtype {type_name(input.dtype)} and bins for dimension 0 with dtype "
                               f"{type_name(bins.dtype)}")
        if bins.ndim != 1 or bins._shape[0] < 1:
            raise RuntimeError("torch.histogramdd: bins tensor should have one dimension and at least 1 entry")
        edges = bins.detach().clone()
    else:
        if isinstance(bins, bool) or not isinstance(bins, int):
            raise TypeError(f"histogram(): argument 'bins' must be int or Tensor, not {type(bins).__name__}")
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        edges = factories.linspace(*_outer_edges(x, range), bins + 1, dtype=input.dtype)
    nbins = edges._shape[0] - 1
    # Bin of each value: the last edge <= it; a value equal to the rightmost edge goes in the last bin.

    index = elementwise.sub(searchsorted(edges, x, right=True), 1)
    if nbins > 0:
        last = views.select(edges, 0, nbins)
        index = elementwise.where(elementwise.eq(x, last), nbins - 1, index)
        inside = elementwise.logical_and(elementwise.ge(x, views.select(edges, 0, 0)), elementwise.le(x, last))
        index = elementwise.where(inside, index, nbins)  # an overflow bin, dropped below
    else:
        index = elementwise.mul(index, 0)
    w = None if weight is None else views.reshape(weight.detach(), (-1,)).to(dtypes.float64)
    counts = bincount(index, w, minlength=nbins + 1)
    hist = views.narrow(counts, 0, 0, nbins).to(input.dtype)
    if density:
        widths = elementwise.sub(views.narrow(edges, 0, 1, nbins), views.narrow(edges, 0, 0, nbins))
        hist = elementwise.div(hist, elementwise.mul(reductions.sum(hist), widths))
    if out is not None:
        write_out(hist, out[0])
        write_out(edges, out[1])
        return histogram_result(out[0], out[1])
    return histogram_result(hist, edges)


def _cpu_only(input: Tensor, overload: str) -> None:
    """PyTorch's histogram/histogramdd have CPU kernels only (its CUDA programs use histc): its error."""
    if input._device.type not in ("cpu", "meta"):
        raise NotImplementedError(f"Could not run 'aten::{overload}' with arguments from the "
                                  f"'{input._device.type.upper()}' backend.")


def _outer_edges(x: Tensor, range_) -> tuple:
    if range_ is not None:
        lo, hi = float(range_[0]), float(range_[1])
    elif numel(x._shape):
        lo, hi = float(reductions.amin(x)), float(reductions.amax(x))
    else:
        lo, hi = 0.0, 1.0  # numpy's default range for no data
    if lo > hi:
        raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {lo:g} max {hi:g} for "
                           f"dimension 0")
    if lo != lo or hi != hi or abs(lo) == float("inf") or abs(hi) == float("inf"):
        raise RuntimeError(f"torch.histogramdd: dimension 0's range [{lo:g}, {hi:g}] is not finite")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


# -- logcumsumexp -----------------------------------------------------------------------------------

def _logcumsumexp_meta(self, dim):
    _check_tensor(self, "logcumsumexp")
    if not (self.dtype.is_floating_point or self.dtype.is_complex) or self.dtype.is_complex:
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{type_name(self.dtype)}'")
    wrap_dim(dim, max(self.ndim, 1))
    return empty(self._shape, self.dtype, META)


logcumsumexp_op = define("logcumsumexp(Tensor self, int dim) -> Tensor", (), _logcumsumexp_meta)
logcumsumexp_op.kernels["meta"] = _logcumsumexp_meta


@logcumsumexp_op.kernel("cpu")
def _logcumsumexp_cpu(self, dim):
    _logcumsumexp_meta(self, dim)
    d = wrap_dim(dim, max(self.ndim, 1))
    work = views.contiguous(convert(self, compute_dtype(self.dtype)))
    out = empty(self._shape, work.dtype, self._device)
    shape = self._shape or (1,)
    _C.logcumsumexp_(out, work, numel(shape[:d]), shape[d], numel(shape[d + 1:]))
    return convert(out, self.dtype)


def logcumsumexp(input: Tensor, dim: int, *, out=None) -> Tensor:
    """log(cumsum(exp(input))) along ``dim``, computed stably."""
    return write_out(logcumsumexp_op(input, dim), out)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
corrcoef                    function method
cov                         function method
diff                        function method
dist                        function method
histogram                   function method
logcumsumexp                function method
nanquantile                 function method
pdist                       function
quantile                    function method
""")
