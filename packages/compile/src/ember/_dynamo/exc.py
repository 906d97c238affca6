"""Exceptions of the capture, under PyTorch's ``torch._dynamo.exc`` names."""

from ember.compiler._exc import (
    BackendCompilerFailed,
    InvalidBackend,
    RecompileError,
    TorchDynamoException,
    TorchRuntimeError,
    UncapturedHigherOrderOpError,
    Unsupported,
    UserError,
    UserErrorType,
)

__all__ = [
    "BackendCompilerFailed", "InvalidBackend", "RecompileError", "TorchDynamoException", "TorchRuntimeError",
    "UncapturedHigherOrderOpError", "Unsupported", "UserError", "UserErrorType",
]
