"""Exceptions of the capture, under PyTorch's ``torch._dynamo.exc`` names."""

from ember.compiler._exc import (
    InvalidBackend,
    TorchDynamoException,
    Unsupported,
    UserError,
    UserErrorType,
)

__all__ = ["InvalidBackend", "TorchDynamoException", "Unsupported", "UserError", "UserErrorType"]
