"""Op families. Importing this package declares every op in ``dispatch.OPS``."""

from . import comparison, creation, indexing, joining, linalg, pointwise, random, reduction, reorder, scatter, sorting, views  # noqa: F401
