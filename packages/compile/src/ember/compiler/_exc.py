"""The capture's exceptions, under PyTorch's ``torch._dynamo.exc`` names and hierarchy (every
one a ``TorchDynamoException``, itself a ``RuntimeError``). ``ember._dynamo.exc`` re-exports
them; ``ember.export`` raises the same ``UserError``."""

from __future__ import annotations

import enum


class TorchDynamoException(RuntimeError):
    pass


class Unsupported(TorchDynamoException):
    """A graph break where ``fullgraph=True`` forbids one."""


class TorchRuntimeError(TorchDynamoException):
    """An error raised by an op while the capture traced it (a higher-order op's branches that
    disagree)."""


class UncapturedHigherOrderOpError(TorchDynamoException):
    """A higher-order op (``cond``, ``while_loop``) whose function could not be captured whole."""


class InternalTorchDynamoError(TorchDynamoException):
    """Python's own error inside the capture that PyTorch's tracer meets itself (unbounded recursion)."""


class InvalidBackend(TorchDynamoException):
    def __init__(self, name):
        super().__init__(f"Invalid backend: {name!r}, see `ember._dynamo.list_backends()` for available backends.")


class RecompileError(TorchDynamoException):
    """A compiled function compiling again while ``config.error_on_recompile`` is set."""


class BackendCompilerFailed(TorchDynamoException):
    """The backend raised while compiling a graph (``inner_exception`` is what it raised)."""

    def __init__(self, backend_fn, inner_exception: Exception, first_useful_frame=None):
        self.backend_name = getattr(backend_fn, "__name__", "?")
        self.inner_exception = inner_exception
        super().__init__(f"backend={self.backend_name!r} raised:\n{type(inner_exception).__name__}: "
                         f"{inner_exception}")


class GuardOnDataDependentSymNode(RuntimeError):
    """A decision on a value only known when the program runs (``if x.sum() > 0:`` under
    ``export``): PyTorch's ``torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode``."""


class ConstraintViolationError(RuntimeError):
    """An example input outside its dim's declared range (``5 not in range [2, 4]``): PyTorch's
    ``torch.fx.experimental.symbolic_shapes.ConstraintViolationError``."""


class UserErrorType(enum.Enum):
    DYNAMIC_CONTROL_FLOW = enum.auto()
    ANTI_PATTERN = enum.auto()
    STANDARD_LIBRARY = enum.auto()
    CONSTRAINT_VIOLATION = enum.auto()
    DYNAMIC_DIM = enum.auto()
    INVALID_INPUT = enum.auto()
    INVALID_OUTPUT = enum.auto()
    UNSUPPORTED_FEATURE = enum.auto()


class UserError(TorchDynamoException):
    """A failure caused by the program or its inputs (a guard on a data-dependent value, an
    export constraint); the message says how to fix it."""

    def __init__(self, error_type: UserErrorType, msg: str, case_name: str | None = None):
        self.error_type = error_type
        self.message = msg
        self.case_name = case_name
        text = msg
        if case_name is not None:
            text += f"\nFor more information about this error, see: exportdb case {case_name}"
        super().__init__(text)
