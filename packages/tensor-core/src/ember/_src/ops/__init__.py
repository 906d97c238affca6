"""Op families. Importing this package declares every op in ``dispatch.OPS``."""

from . import comparison, creation, indexing, joining, lapack, linalg, pointwise, random, reduction, reorder, views  # noqa: F401
