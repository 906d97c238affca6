"""ember.onnx: ONNX export of ember models (PyTorch's ``torch.onnx``), on the ``onnx`` package.

Needs the ``onnx`` extra (``pip install ember-export[onnx]``); ``import ember.export`` never
imports it.
"""

from ._api import TrainingMode, export
from ._builder import UnsupportedOp
from ._exporter import DEFAULT_OPSET, ONNXProgram, translate_program
from ._translations import TRANSLATIONS

OnnxExporterError = UnsupportedOp

__all__ = ["DEFAULT_OPSET", "ONNXProgram", "OnnxExporterError", "TRANSLATIONS", "TrainingMode", "UnsupportedOp",
           "export", "translate_program"]
