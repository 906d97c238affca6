"""Op families. Importing this package declares every op in ``dispatch.OPS``."""

from . import (  # noqa: F401
    comparison,
    creation,
    indexing,
    joining,
    lapack,
    linalg,
    nn_conv,
    nn_pool,
    nn_resample,
    pointwise,
    random,
    reduction,
    reorder,
    views,
)
