"""ember.onnx: ONNX export of ember models (PyTorch's ``torch.onnx``), on the ``onnx`` package.

Needs the ``onnx`` extra (``pip install ember-export[onnx]``); ``import ember.export`` never
imports it.
"""

from ._api import OperatorExportTypes, TrainingMode, export, is_in_onnx_export
from ._builder import UnsupportedOp
from ._exporter import DEFAULT_OPSET, ONNXProgram, translate_program
from ._translations import TRANSLATIONS
from .errors import OnnxExporterError

__all__ = ["DEFAULT_OPSET", "ONNXProgram", "OnnxExporterError", "OperatorExportTypes", "TRANSLATIONS", "TrainingMode",
           "UnsupportedOp", "export", "is_in_onnx_export", "translate_program"]
