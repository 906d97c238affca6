"""``torch.histogramdd``: the D-dimensional histogram of the points in the last dim of
``input`` (NumPy's histogramdd): per dim, equal-width bins over a range (the data's or given)
or explicit edges; a point on a dim's rightmost edge counts in the last bin, points outside
the range are dropped. Composed from searchsorted and bincount."""

from __future__ import annotations

from ... import dtypes
from ...optable import declare
from ...tensor import Tensor
from .._common import return_type, type_name
from ..creation import factories
from ..indexing.sorting import bincount, searchsorted
from ..pointwise import elementwise
from ..shape import views
from .statistics import _outer_edges

_histogramdd_result = return_type("histogramdd", ["hist", "bin_edges"])


def histogramdd(input: Tensor, bins, *, range=None, weight: Tensor | None = None,  # noqa: A002
                density: bool = False, out=None):
    fn = "torch.histogramdd"
    if not isinstance(input, Tensor):
        raise TypeError(f"histogramdd(): argument 'input' must be Tensor, not {type(input).__name__}")
    from .statistics import _cpu_only

    _cpu_only(input, "_histogramdd_bin_edges")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{type_name(input.dtype)}'")
    if input.ndim < 2:
        raise RuntimeError(f"{fn}: input tensor should have at least 2 dimensions, but got {input.ndim}")
    D = input.shape[-1]
    points = views.reshape(input.detach(), (-1, D))
    if isinstance(bins, int) and not isinstance(bins, bool):
        bins = [bins] * D
    bins = list(bins)
    if len(bins) != D:
        raise RuntimeError(f"{fn}: expected {D} sequences of bin edges for each dimension, but got {len(bins)}")
    if range is not None and len(range) != 2 * D:
        raise RuntimeError(f"{fn}: for a {D}-dimensional histogram range should have {2 * D} elements, but got "
                           f"{len(range)}")
    if weight is not None:
        if weight.dtype is not input.dtype:
            raise RuntimeError(f"{fn}: if weight tensor is provided, input tensor and weight tensor should have the "
                               f"same dtype, but got input({type_name(input.dtype)}), and "
                               f"weight({type_name(weight.dtype)})")
        if tuple(weight.shape) != tuple(input.shape[:-1]):
            raise RuntimeError(f"{fn}: if weight tensor is provided it should have the same shape as the input "
                               f"tensor excluding its innermost dimension, but got input with shape "
                               f"{list(input.shape)} and weight with shape {list(weight.shape)}")
    edges = []
    for d, b in enumerate(bins):
        column = points[:, d]
        if isinstance(b, Tensor):
            if range is not None:
                raise TypeError("histogramdd(): argument 'range' is not allowed with Tensor bins")
            if b.ndim != 1 or b.shape[0] < 1:
                raise RuntimeError(f"{fn}: bins tensor should have one dimension and at least 1 entry, but got "
                                   f"bins for dimension {d}")
            if b.dtype is not input.dtype:
                raise RuntimeError(f"{fn}: input tensor and bins tensors should have the same dtype, but got input "
                                   f"with dtype {type_name(input.dtype)} and bins for dimension {d} with dtype "
                                   f"{type_name(b.dtype)}")
            edges.append(b.detach().clone())
        else:
            if b <= 0:
                raise RuntimeError(f"{fn}: bins must be > 0, but got {b} for dimension {d}")
            span = None if range is None else (range[2 * d], range[2 * d + 1])
            edges.append(factories.linspace(*_outer_edges(column, span), b + 1, dtype=input.dtype))
    counts = [e.shape[0] - 1 for e in edges]
    flat = factories.zeros(points.shape[0], dtype=dtypes.int64)
    inside = factories.ones(points.shape[0], dtype=dtypes.bool)
    stride = 1
    for d in reversed(_range(D)):
        e, n, column = edges[d], counts[d], points[:, d]
        index = elementwise.sub(searchsorted(e, column.contiguous(), right=True), 1)
        last = e[n]
        index = elementwise.where(elementwise.eq(column, last), n - 1, index)
        inside = elementwise.logical_and(inside, elementwise.logical_and(elementwise.ge(column, e[0]),
                                                                         elementwise.le(column, last)))
        flat = elementwise.add(flat, elementwise.mul(index.clamp(0, max(n - 1, 0)), stride))
        stride *= n
    total = stride
    flat = elementwise.where(inside, flat, total)  # an overflow bin, dropped below
    w = None if weight is None else views.reshape(weight.detach(), (-1,)).to(dtypes.float64)
    hist = bincount(flat, w, minlength=total + 1)[:total].to(input.dtype).reshape(counts)
    if density:
        volume = None
        for d, e in enumerate(edges):
            width = (e[1:] - e[:-1]).reshape([-1 if i == d else 1 for i in _range(D)])
            volume = width if volume is None else volume * width
        hist = hist / (hist.sum() * volume)
    if out is not None:
        hist_out, edges_out = out
        hist_out.resize_(hist.shape).copy_(hist)
        for o, e in zip(edges_out, edges):
            o.resize_(e.shape).copy_(e)
        return _histogramdd_result(hist_out, tuple(edges_out))
    return _histogramdd_result(hist, tuple(edges))


_range = range


declare(__name__, """
histogramdd    function
""")
