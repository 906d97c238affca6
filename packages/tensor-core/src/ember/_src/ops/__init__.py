"""Op families. Importing this package declares every op in ``dispatch.OPS``."""

from . import comparison, creation, indexing, joining, linalg, pointwise, random, reduction, reorder, views  # noqa: F401
from . import nn_attention, nn_loss, nn_misc, nn_norm  # noqa: F401
