"""``torch.export.unflatten``'s public names (``from ember.export.unflatten import UnflattenedModule``).

``ember.export.unflatten`` stays the function, as ``torch.export.unflatten``: the package imports
this module before binding the name."""

from ._unflatten import FlatArgsAdapter, InterpreterModule, UnflattenedModule, unflatten

__all__ = ["FlatArgsAdapter", "InterpreterModule", "UnflattenedModule", "unflatten"]
