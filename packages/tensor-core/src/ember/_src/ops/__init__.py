"""Op families. Importing this package declares every op in ``dispatch.OPS``."""

from . import (  # noqa: F401
    comparison,
    creation,
    indexing,
    joining,
    linalg,
    nn_attention,
    nn_loss,
    nn_misc,
    nn_norm,
    pointwise,
    random,
    reduction,
    reorder,
    views,
)
