"""Export's user-facing error is the capture's: PyTorch's ``torch._dynamo.exc.UserError`` (a
RuntimeError), so ``except`` clauses written against either name catch it."""

from ember.compiler import _exc
from ember.compiler._exc import UserError, UserErrorType


class GuardOnDataDependentSymNode(_exc.GuardOnDataDependentSymNode, UserError):
    """Data-dependent control flow met by export: PyTorch 2.13 raises
    ``GuardOnDataDependentSymNode`` (so does ember); earlier ember programs caught ``UserError``."""


__all__ = ["GuardOnDataDependentSymNode", "UserError", "UserErrorType"]
