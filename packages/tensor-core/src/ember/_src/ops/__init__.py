"""Op families. Importing this package declares every op in ``dispatch.OPS``."""

from . import creation, indexing, linalg, pointwise, random, reduction, views  # noqa: F401
