"""Op families. Importing this package declares every op in ``dispatch.OPS``."""

from . import (  # noqa: F401
    comparison,
    creation,
    indexing,
    joining,
    lapack,
    linalg,
    nn_attention,
    nn_conv,
    nn_loss,
    nn_misc,
    nn_norm,
    nn_pool,
    nn_resample,
    pointwise,
    random,
    reduction,
    reorder,
    views,
)
