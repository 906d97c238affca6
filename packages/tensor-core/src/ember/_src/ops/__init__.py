"""Op families. Importing this package declares every op in ``dispatch.OPS``."""

from . import (  # noqa: F401
    comparison,
    creation,
    indexing,
    joining,
    lapack,
    linalg,
    pointwise,
    random,
    reduction,
    reorder,
    views,
)
