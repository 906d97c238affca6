"""Export's user-facing error is the capture's: PyTorch's ``torch._dynamo.exc.UserError`` (a
RuntimeError), so ``except`` clauses written against either name catch it."""

from ember.compiler._exc import UserError, UserErrorType

__all__ = ["UserError", "UserErrorType"]
