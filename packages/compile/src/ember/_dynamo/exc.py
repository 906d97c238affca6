"""Exceptions of the capture, under PyTorch's ``torch._dynamo.exc`` names."""

from ember.compiler._exc import (
    BackendCompilerFailed,
    InternalTorchDynamoError,
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
    "BackendCompilerFailed", "InternalTorchDynamoError", "InvalidBackend", "RecompileError", "TorchDynamoException",
    "TorchRuntimeError",
    "UncapturedHigherOrderOpError", "Unsupported", "UserError", "UserErrorType",
]
