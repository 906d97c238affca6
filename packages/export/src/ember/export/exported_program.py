"""``torch.export.exported_program``'s public names."""

from ._decompose import default_decompositions
from ._program import ExportedProgram, ModuleCallEntry, ModuleCallSignature

__all__ = ["ExportedProgram", "ModuleCallEntry", "ModuleCallSignature", "default_decompositions"]
