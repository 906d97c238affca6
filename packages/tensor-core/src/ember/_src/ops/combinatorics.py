"""Index sets and membership: ``isin`` (sort + searchsorted), ``combinations`` (masked meshgrid, as
PyTorch builds it, so it is differentiable), ``vander`` (cumprod).
"""

from __future__ import annotations

from .. import dtypes as dt
from ..optable import declare
from ..tensor import Tensor
from . import creation as cr
from . import joining as jn
from . import pointwise as pw
from . import views as vw
from ._common import HALF_TYPES, type_name


def _as_operand(x, dtype):
    if isinstance(x, Tensor):
        return x.detach().to(dtype)
    return cr.scalar_tensor(x, dtype=dtype)


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each element of ``elements`` occurs in ``test_elements`` (either may be a scalar)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin() received an invalid combination of arguments - got "
                        f"({type(elements).__name__}, {type(test_elements).__name__}), but expected one of: "
                        f"(Tensor elements, Tensor test_elements), (Scalar element, Tensor test_elements), "
                        f"(Tensor elements, Scalar test_element)")
    for x in (elements, test_elements):
        if not isinstance(x, (Tensor, bool, int, float)):
            raise TypeError(f"isin(): expected a Tensor or a number, got {type(x).__name__}")
    common = dt.result_type_of(elements, test_elements)
    if common.is_complex or common is dt.bool:
        raise RuntimeError(f"Unsupported input type encountered for isin(): {type_name(common)}")
    work = dt.float32 if common in HALF_TYPES else common
    elems = _as_operand(elements, work)
    tests = vw.reshape(_as_operand(test_elements, work), (-1,))
    if tests._shape[0] == 0:
        found = cr.zeros(elems._shape, dtype=dt.bool)
    else:
        from .scatter import gather
        from .sorting import searchsorted, sort

        ordered = sort(tests)[0]
        pos = pw.clamp(searchsorted(ordered, vw.reshape(elems, (-1,))), max=tests._shape[0] - 1)
        found = vw.reshape(pw.eq(gather(ordered, 0, pos), vw.reshape(elems, (-1,))), elems._shape)
    return pw.logical_not(found) if invert else found


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-r combinations of input's elements, one per row, in lexicographic order."""
    if not isinstance(input, Tensor):
        raise TypeError(f"combinations(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input._shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return cr.empty((0,), dtype=input.dtype)
    from .indexing import masked_select
    from .reorder import meshgrid

    grids = meshgrid(*([input] * r), indexing="ij")
    index = meshgrid(*([cr.arange(input._shape[0])] * r), indexing="ij")
    mask = cr.ones(index[0]._shape, dtype=dt.bool)
    for a, b in zip(index, index[1:]):
        mask = pw.logical_and(mask, pw.le(a, b) if with_replacement else pw.lt(a, b))
    return jn.stack([masked_select(g, mask) for g in grids], 1)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """Vandermonde matrix: columns x**(N-1), ..., x**0 (reversed when ``increasing``)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"vander(): argument 'x' (position 1) must be Tensor, not {type(x).__name__}")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x._shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dtype = dt.promote_types(x.dtype, dt.int64)
    ones = cr.ones((x._shape[0], min(n, 1)), dtype=dtype)
    if n > 1:
        from .reduction_composite import cumprod

        powers = cumprod(vw.expand(vw.unsqueeze(x.to(dtype), 1), (x._shape[0], n - 1)), 1)
        result = jn.cat([ones, powers], 1)
    else:
        result = ones
    if not increasing:
        from .reorder import flip

        result = flip(result, (1,))
    return result


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
combinations                function
isin                        function
vander                      function
""")
