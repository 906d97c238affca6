"""Numerical integration and differentiation of sampled functions: ``trapezoid`` (``trapz``),
``cumulative_trapezoid`` and ``gradient``, composed of slicing and arithmetic in the order PyTorch
evaluates them (so float results match bit for bit), hence differentiable.
"""

from __future__ import annotations

from ..optable import declare
from ..shapes import wrap_dim
from ..tensor import Tensor
from . import joining as jn
from . import pointwise as pw
from . import reduction as rd
from . import views as vw


def _slice(t: Tensor, dim: int, start: int, stop: int | None = None) -> Tensor:
    """t[start:stop] along dim, with Python's negative indices."""
    n = t._shape[dim]
    lo = max(0, start + n if start < 0 else min(start, n))
    hi = n if stop is None else max(0, stop + n if stop < 0 else min(stop, n))
    return vw.narrow(t, dim, lo, max(0, hi - lo))


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
        return vw.reshape(_diff1(x, 0), tuple(shape))
    return _diff1(x, wrap_dim(d - y.ndim, x.ndim))


def _diff1(t: Tensor, dim: int) -> Tensor:
    n = t._shape[dim]
    return pw.sub(vw.narrow(t, dim, 1, max(n - 1, 0)), vw.narrow(t, dim, 0, max(n - 1, 0)))


def trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """Integral of y along ``dim`` by the trapezoid rule (sample points x, or uniform spacing dx)."""
    _check_y(y, "trapezoid")
    d = wrap_dim(dim, max(y.ndim, 1))
    spacing = _spacing(y, x, dx, d, "trapezoid")
    if y._shape[d] == 0:
        return pw.mul(rd.sum(y, d), 0)
    if isinstance(spacing, Tensor):
        pairs = pw.add(_slice(y, d, 1), _slice(y, d, 0, -1))
        return pw.div(rd.sum(pw.mul(spacing, pairs), d), 2.0)
    ends = pw.add(vw.select(y, d, 0), vw.select(y, d, -1))
    return pw.mul(pw.sub(rd.sum(y, d), pw.mul(ends, 0.5)), spacing)


def trapz(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """Alias of :func:`trapezoid`."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """Running trapezoid-rule integral of y along ``dim`` (one element shorter than y there)."""
    _check_y(y, "cumulative_trapezoid")
    d = wrap_dim(dim, max(y.ndim, 1))
    spacing = _spacing(y, x, dx, d, "cumulative_trapezoid")
    pairs = pw.add(_slice(y, d, 1), _slice(y, d, 0, -1))
    from .reduction_composite import cumsum

    if isinstance(spacing, Tensor):
        return pw.div(cumsum(pw.mul(spacing, pairs), d), 2.0)
    return cumsum(pw.mul(pairs, spacing / 2.0), d)


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
    center = pw.div(pw.sub(_slice(f, d, 2), _slice(f, d, 0, -2)), h)
    if edge_order == 1:
        first = pw.div(pw.sub(_slice(f, d, 1, 2), _slice(f, d, 0, 1)), h)
        last = pw.div(pw.sub(_slice(f, d, -1), _slice(f, d, -2, -1)), h)
    else:
        first = pw.div(pw.sub(pw.add(pw.mul(_slice(f, d, 0, 1), -1.5), pw.mul(_slice(f, d, 1, 2), 2)),
                              pw.mul(_slice(f, d, 2, 3), 0.5)), h)
        last = pw.div(pw.add(pw.sub(pw.mul(_slice(f, d, -3, -2), 0.5), pw.mul(_slice(f, d, -2, -1), 2)),
                             pw.mul(_slice(f, d, -1), 1.5)), h)
    return jn.cat([first, pw.div(center, 2), last], d)


def _gradient_coordinates(f: Tensor, coords: Tensor, d: int, edge_order: int) -> Tensor:
    shape = [1] * f.ndim
    shape[d] = -1
    step = _diff1(coords, 0)
    dx1, dx2 = _slice(step, 0, 0, -1), _slice(step, 0, 1)
    a = vw.reshape(pw.div(pw.neg(dx2), pw.mul(dx1, pw.add(dx1, dx2))), tuple(shape))
    b = vw.reshape(pw.div(pw.sub(dx2, dx1), pw.mul(dx1, dx2)), tuple(shape))
    c = vw.reshape(pw.div(dx1, pw.mul(dx2, pw.add(dx1, dx2))), tuple(shape))
    center = pw.add(pw.add(pw.mul(a, _slice(f, d, 0, -2)), pw.mul(b, _slice(f, d, 1, -1))),
                    pw.mul(c, _slice(f, d, 2)))
    h0, hn = vw.select(step, 0, 0), vw.select(step, 0, -1)
    if edge_order == 1:
        first = pw.div(pw.sub(_slice(f, d, 1, 2), _slice(f, d, 0, 1)), h0)
        last = pw.div(pw.sub(_slice(f, d, -1), _slice(f, d, -2, -1)), hn)
    else:
        h1, hm = vw.select(step, 0, 1), vw.select(step, 0, -2)
        a0 = pw.neg(pw.div(pw.add(pw.mul(h0, 2.0), h1), pw.mul(h0, pw.add(h0, h1))))
        b0 = pw.div(pw.add(h0, h1), pw.mul(h0, h1))
        c0 = pw.div(pw.neg(h0), pw.mul(h1, pw.add(h0, h1)))
        first = pw.add(pw.add(pw.mul(a0, _slice(f, d, 0, 1)), pw.mul(b0, _slice(f, d, 1, 2))),
                       pw.mul(c0, _slice(f, d, 2, 3)))
        an = pw.div(hn, pw.mul(hm, pw.add(hn, hm)))
        bn = pw.neg(pw.div(pw.add(hn, hm), pw.mul(hn, hm)))
        cn = pw.div(pw.add(pw.mul(hn, 2), hm), pw.mul(hn, pw.add(hn, hm)))
        last = pw.add(pw.add(pw.mul(an, _slice(f, d, -3, -2)), pw.mul(bn, _slice(f, d, -2, -1))),
                      pw.mul(cn, _slice(f, d, -1)))
    return jn.cat([first, center, last], d)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
cumulative_trapezoid        function
gradient                    function
trapezoid                   function
trapz                       function
""")
