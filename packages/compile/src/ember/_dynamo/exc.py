"""Exceptions of the capture, under PyTorch's ``torch._dynamo.exc`` names."""

from ember.compiler._recorder import Unsupported


class TorchDynamoException(RuntimeError):
    pass


class InvalidBackend(TorchDynamoException):
    def __init__(self, name):
        super().__init__(f"Invalid backend: {name!r}, see `ember._dynamo.list_backends()` for available backends.")


__all__ = ["InvalidBackend", "TorchDynamoException", "Unsupported"]
