"""``torch.export.graph_signature``'s public names (``from ember.export.graph_signature import InputKind``)."""

from ._signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
)

ExportBackwardSignature = None  # PyTorch's joint-graph signature: ember exports forward graphs only

__all__ = ["ConstantArgument", "ExportBackwardSignature", "ExportGraphSignature", "InputKind", "InputSpec",
           "OutputKind", "OutputSpec", "SymIntArgument", "TensorArgument"]
