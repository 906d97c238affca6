"""``torch.onnx.errors``'s exporter error (``from ember.onnx.errors import OnnxExporterError``)."""

from ._builder import UnsupportedOp

OnnxExporterError = UnsupportedOp
UnsupportedOperatorError = UnsupportedOp

__all__ = ["OnnxExporterError", "UnsupportedOperatorError"]
