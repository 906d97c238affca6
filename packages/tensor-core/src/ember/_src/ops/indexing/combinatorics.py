"""Index sets and membership: ``isin`` (sort + searchsorted), ``combinations`` (masked meshgrid, as
PyTorch builds it, so it is differentiable), ``vander`` (cumprod).
"""

from __future__ import annotations

from ... import dtypes
from ...optable import declare
from ...tensor import Tensor
from .._common import HALF_TYPES, type_name
from ..creation import factories
from ..pointwise import elementwise
from ..reduction.composite import cumprod
from ..shape import joining, views
from ..shape.reorder import flip, meshgrid
from .gather_scatter import gather
from .sorting import searchsorted, sort
from .subscripts import masked_select


def _as_operand(x, dtype, device=None):
    if isinstance(x, Tensor):
        return x.detach().to(dtype)
    return factories.scalar_tensor(x, dtype=dtype, device=device)  # on the other operand's device


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
    common = dtypes.result_type_of(elements, test_elements)
    if common.is_complex or common is dtypes.bool:
        raise RuntimeError(f"Unsupported input type encountered for isin(): {type_name(common)}")
    work = dtypes.float32 if common in HALF_TYPES else common
    device = (elements if isinstance(elements, Tensor) else test_elements)._device
    elems = _as_operand(elements, work, device)
    tests = views.reshape(_as_operand(test_elements, work, device), (-1,))
    if tests._shape[0] == 0:
        found = factories.zeros(elems._shape, dtype=dtypes.bool, device=device)
    else:
        ordered = sort(tests)[0]
        pos = elementwise.clamp(searchsorted(ordered, views.reshape(elems, (-1,))), max=tests._shape[0] - 1)
        found = views.reshape(elementwise.eq(gather(ordered, 0, pos), views.reshape(elems, (-1,))), elems._shape)
    return elementwise.logical_not(found) if invert else found


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-r combinations of input's elements, one per row, in lexicographic order."""
    if not isinstance(input, Tensor):
        raise TypeError(f"combinations(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input._shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return factories.empty((0,), dtype=input.dtype)

    grids = meshgrid(*([input] * r), indexing="ij")
    index = meshgrid(*([factories.arange(input._shape[0])] * r), indexing="ij")
    mask = factories.ones(index[0]._shape, dtype=dtypes.bool)
    for a, b in zip(index, index[1:]):
        mask = elementwise.logical_and(mask, elementwise.le(a, b) if with_replacement else elementwise.lt(a, b))
    return joining.stack([masked_select(g, mask) for g in grids], 1)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """Vandermonde matrix: columns x**(N-1), ..., x**0 (reversed when ``increasing``)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"vander(): argument 'x' (position 1) must be Tensor, not {type(x).__name__}")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x._shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dtype = dtypes.promote_types(x.dtype, dtypes.int64)
    ones = factories.ones((x._shape[0], min(n, 1)), dtype=dtype, device=x._device)
    if n > 1:
        powers = cumprod(views.expand(views.unsqueeze(x.to(dtype), 1), (x._shape[0], n - 1)), 1)
        result = joining.cat([ones, powers], 1)
    else:
        result = ones
    if not increasing:
        result = flip(result, (1,))
    return result


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
combinations                function
isin                        function
vander                      function
""")
