"""``ember.return_types``: the named-tuple types that ops with several results return (``max``,
``sort``, ``linalg_svd``, ...), as ``torch.return_types``. Each type is named after its op, so a
result pickles by reference to this module."""

from __future__ import annotations

from ember._src.ops.indexing import sorting as _sorting
from ember._src.ops.linalg import lapack as _lapack
from ember._src.ops.linalg import solves as _solves
from ember._src.ops.pointwise import special as _special
from ember._src.ops.reduction import composite as _composite
from ember._src.ops.reduction import reduce as _reduce
from ember._src.ops.reduction import statistics as _statistics

_TYPES = [
    _reduce.max_result, _reduce.min_result, _reduce.aminmax_result, _sorting.sort_result, _sorting.topk_result,
    _sorting.kthvalue_result, _sorting.median_result, _sorting.nanmedian_result, _sorting.mode_result,
    _composite.cummax_result, _composite.cummin_result, _special.frexp_result, _statistics.histogram_result,
    _lapack._slogdet_result, _lapack._inv_ex_result, _lapack._cholesky_ex_result, _lapack._qr_result,
    _lapack._torch_slogdet_result, _lapack._linalg_qr_result, _lapack._eigh_result, _lapack._svd_result,
    _lapack._torch_svd_result, _lapack._lstsq_result, _lapack._solve_ex_result, _solves.lu_factor_result,
    _solves.lu_factor_ex_result, _solves.lu_result, _solves.lu_unpack_result, _solves.triangular_solve_result,
]

__all__ = []
for _t in _TYPES:
    _t.__module__ = __name__
    globals()[_t.__name__] = _t
    __all__.append(_t.__name__)

all_return_types = tuple(_TYPES)
