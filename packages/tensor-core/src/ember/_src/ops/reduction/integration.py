"""Numerical integration and differentiation of sampled functions: ``trapezoid`` (``trapz``),
``cumulative_trapezoid`` and ``gradient``, composed of slicing and arithmetic in the order PyTorch
evaluates them (so float results match bit for bit), hence differentiable.
"""

from __future__ import annotations

from ...optable import declare
from ...shapes import wrap_dim
from ...tensor import Tensor
from ..pointwise import elementwise
from ..shape import joining, views
from . import reduce as reductions
from .composite import cumsum


def _slice(t: Tensor, dim: int, start: int, stop: int | None = None) -> Tensor:
    """t[start:stop] along dim, with Python's negative indices."""
    n = t._shape[dim]
    lo = max(0, start + n if start < 0 else min(start, n))
    hi = n if stop is None else max(0, stop + n if stop < 0 else min(stop, n))
    return views.narrow(t, dim, lo, max(0, hi - lo))


def _check_y(y, fn: str) -> None:
    if not isinstance(y, Tensor):
        raise TypeError(f"{fn}(): argument 'y' (position 1) must be Tensor, not {type(y).__name__}")


def _spacing(y: Tensor, x, dx, d: int, fn: str):
    """The sample spacing: a Python number, or a tensor broadcasting against y's slices along d."""
    if x is not None and dx is not None:
        raise TypeError(f"{fn}() received an invalid combination of arguments: both x and dx given")
    if x is None:
        return 1 if dx is None else dx
    if not isinstance(x, Tensor):
        return x  # trapezoid(y, 2.0): a scalar spacing
    if x.ndim == 1:
        if x._shape[0] != y._shape[d]:
            raise RuntimeError(f"{fn}: There must be one `x` value for each sample point")
        shape = [1] * y.ndim
        shape[d] = x._shape[0] - 1 if x._shape[0] else 0
        return views.reshape(_diff1(x, 0), tuple(shape))
    return _diff1(x, wrap_dim(d - y.ndim, x.ndim))


def _diff1(t: Tensor, dim: int) -> Tensor:
    n = t._shape[dim]
    return elementwise.sub(views.narrow(t, dim, 1, max(n - 1, 0)), views.narrow(t, dim, 0, max(n - 1, 0)))


def trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """Integral of y along ``dim`` by the trapezoid rule (sample points x, or uniform spacing dx)."""
    _check_y(y, "trapezoid")
    d = wrap_dim(dim, max(y.ndim, 1))
    spacing = _spacing(y, x, dx, d, "trapezoid")
    if y._shape[d] == 0:
        return elementwise.mul(reductions.sum(y, d), 0)
    if isinstance(spacing, Tensor):
        pairs = elementwise.add(_slice(y, d, 1), _slice(y, d, 0, -1))
        return elementwise.div(reductions.sum(elementwise.mul(spacing, pairs), d), 2.0)
    ends = elementwise.add(views.select(y, d, 0), views.select(y, d, -1))
    return elementwise.mul(elementwise.sub(reductions.sum(y, d), elementwise.mul(ends, 0.5)), spacing)


def trapz(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """Alias of :func:`trapezoid`."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """Running trapezoid-rule integral of y along ``dim`` (one element shorter than y there)."""
    _check_y(y, "cumulative_trapezoid")
    d = wrap_dim(dim, max(y.ndim, 1))
    spacing = _spacing(y, x, dx, d, "cumulative_trapezoid")
    pairs = elementwise.add(_slice(y, d, 1), _slice(y, d, 0, -1))

    if isinstance(spacing, Tensor):
        return elementwise.div(cumsum(elementwise.mul(spacing, pairs), d), 2.0)
    return cumsum(elementwise.mul(pairs, spacing / 2.0), d)


def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1):
    """Estimates the gradient of a sampled function with second-order central differences in the
    interior and first- or second-order one-sided differences at the edges; one tensor per dim."""
    if not isinstance(input, Tensor):
        raise TypeError(f"gradient(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = list(range(input.ndim)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    dims = [wrap_dim(d, input.ndim) for d in dims]
    if len(set(dims)) != len(dims):
        raise RuntimeError("dim appears multiple times in the list of dims")
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            where = (f"'self.dim() = {input.ndim}', since dim argument was not given" if dim is None
                     else f"'len(dim) = {len(dims)}'")
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or a list of length "
                               f"equal to {where}, but got a list of length {len(spacing)}")
        spacings = list(spacing)
    else:
        spacings = [spacing] * len(dims)
    for d in dims:
        if input._shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    results = []
    for d, h in zip(dims, spacings):
        if isinstance(h, Tensor):
            if h.ndim != 1 or h._shape[0] != input._shape[d]:
                raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and to have one "
                                   f"coordinate per sample along dim {d}, but got shape {list(h._shape)}")
            results.append(_gradient_coordinates(input, h, d, edge_order))
        else:
            results.append(_gradient_uniform(input, h, d, edge_order))
    return tuple(results)


def _gradient_uniform(f: Tensor, h, d: int, edge_order: int) -> Tensor:
    center = elementwise.div(elementwise.sub(_slice(f, d, 2), _slice(f, d, 0, -2)), h)
    if edge_order == 1:
        first = elementwise.div(elementwise.sub(_slice(f, d, 1, 2), _slice(f, d, 0, 1)), h)
        last = elementwise.div(elementwise.sub(_slice(f, d, -1), _slice(f, d, -2, -1)), h)
    else:
        first = elementwise.div(
            elementwise.sub(
                elementwise.add(
                    elementwise.mul(_slice(f, d, 0, 1), -1.5), elementwise.mul(_slice(f, d, 1, 2), 2)
                ),
                elementwise.mul(_slice(f, d, 2, 3), 0.5),
            ),
            h,
        )
        last = elementwise.div(
            elementwise.add(
                elementwise.sub(
                    elementwise.mul(_slice(f, d, -3, -2), 0.5), elementwise.mul(_slice(f, d, -2, -1), 2)
                ),
                elementwise.mul(_slice(f, d, -1), 1.5),
            ),
            h,
        )
    return joining.cat([first, elementwise.div(center, 2), last], d)


def _gradient_coordinates(f: Tensor, coords: Tensor, d: int, edge_order: int) -> Tensor:
    shape = [1] * f.ndim
    shape[d] = -1
    step = _diff1(coords, 0)
    dx1, dx2 = _slice(step, 0, 0, -1), _slice(step, 0, 1)
    a = views.reshape(
        elementwise.div(elementwise.neg(dx2), elementwise.mul(dx1, elementwise.add(dx1, dx2))), tuple(shape)
    )
    b = views.reshape(elementwise.div(elementwise.sub(dx2, dx1), elementwise.mul(dx1, dx2)), tuple(shape))
    c = views.reshape(elementwise.div(dx1, elementwise.mul(dx2, elementwise.add(dx1, dx2))), tuple(shape))
    center = elementwise.add(
        elementwise.add(elementwise.mul(a, _slice(f, d, 0, -2)), elementwise.mul(b, _slice(f, d, 1, -1))),
        elementwise.mul(c, _slice(f, d, 2)),
    )
    h0, hn = views.select(step, 0, 0), views.select(step, 0, -1)
    if edge_order == 1:
        first = elementwise.div(elementwise.sub(_slice(f, d, 1, 2), _slice(f, d, 0, 1)), h0)
        last = elementwise.div(elementwise.sub(_slice(f, d, -1), _slice(f, d, -2, -1)), hn)
    else:
        h1, hm = views.select(step, 0, 1), views.select(step, 0, -2)
        a0 = elementwise.neg(
            elementwise.div(
                elementwise.add(elementwise.mul(h0, 2.0), h1), elementwise.mul(h0, elementwise.add(h0, h1))
            )
        )
        b0 = elementwise.div(elementwise.add(h0, h1), elementwise.mul(h0, h1))
        c0 = elementwise.div(elementwise.neg(h0), elementwise.mul(h1, elementwise.add(h0, h1)))
        first = elementwise.add(
            elementwise.add(elementwise.mul(a0, _slice(f, d, 0, 1)), elementwise.mul(b0, _slice(f, d, 1, 2))),
            elementwise.mul(c0, _slice(f, d, 2, 3)),
        )
        an = elementwise.div(hn, elementwise.mul(hm, elementwise.add(hn, hm)))
        bn = elementwise.neg(elementwise.div(elementwise.add(hn, hm), elementwise.mul(hn, hm)))
        cn = elementwise.div(elementwise.add(elementwise.mul(hn, 2), hm), elementwise.mul(hn, elementwise.add(hn, hm)))
        last = elementwise.add(
            elementwise.add(
                elementwise.mul(an, _slice(f, d, -3, -2)), elementwise.mul(bn, _slice(f, d, -2, -1))
            ),
            elementwise.mul(cn, _slice(f, d, -1)),
        )
    return joining.cat([first, center, last], d)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
cumulative_trapezoid        function
gradient                    function
trapezoid                   function
trapz                       function
""")
