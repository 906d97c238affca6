"""``torch.export.dynamic_shapes``'s public names (``from ember.export.dynamic_shapes import Dim``)."""

from ._constraints import Constraint
from ._dims import Dim, dims
from ._dynamic_shapes import AdditionalInputs, ShapesCollection

__all__ = ["AdditionalInputs", "Constraint", "Dim", "ShapesCollection", "dims"]
